package replicationsync

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/internal/pluginrpc"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
	"github.com/keelmq/keel/sdk/storehost"
)

// BenchmarkAckLatency: 1 or 64 producers, each sending one message at a
// time and waiting for the slave's acknowledgement (ns/op with one
// producer is a message's round trip; with 64, 1/throughput), with
// the master's and the slave's replicator in-process (builtin) or as the
// external binary (over the lane, or gRPC alone), to show what each
// process boundary adds (issue #19).
// lane-calls/msg counts the Host calls each external side made.
func BenchmarkAckLatency(b *testing.B) {
	bin := plugintest.Build(b, "./cmd/replication-sync")
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler)) // the builtin logs through the default logger
	defer slog.SetDefault(prev)
	for _, c := range []struct{ master, slave string }{{"builtin", "builtin"}, {"external", "builtin"}, {"builtin", "external"}, {"external", "external"}, {"external-grpc", "external-grpc"}} {
		for _, producers := range []int{1, 64} {
			b.Run(fmt.Sprintf("master=%s/slave=%s/p%d", c.master, c.slave, producers), func(b *testing.B) {
				ackRoundTrips(b, bin, c.master, c.slave, producers)
			})
		}
	}
}

// ackRoundTrips runs the benchmark with each side's replicator "builtin",
// "external" or "external-grpc" (external without the lane: every Host
// call over gRPC, as before it).
func ackRoundTrips(t *testing.B, bin, master, slave string, producers int) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	mk := func(mode string) sdk.Replicator {
		if mode == "builtin" {
			return New()
		}
		c, err := pluginrpc.Dial(context.Background(), pluginrpc.DialOptions{Path: bin, Logger: slog.New(slog.DiscardHandler), SocketDir: t.TempDir(),
			NoLane: mode == "external-grpc"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Kill)
		r, err := c.Replicator()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	open := func() (*core.Store, *storehost.Host) {
		s, err := core.Open(core.Options{Dir: t.TempDir(), SegmentSize: 64 << 20, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, storehost.New(s, slog.New(slog.DiscardHandler))
	}
	ms, mh := open()
	_, sh := open()
	cfg := func(role, peer string) sdk.Config {
		doc := "[replication.config]\n" + fast + "\n"
		return sdk.Config{Name: "sync", Document: []byte(doc), Section: "replication", Role: role, Addr: addr, PeerAddr: peer, Secret: "s", DataDir: t.TempDir()}
	}
	ctx := context.Background()
	m, s := mk(master), mk(slave)
	if err := m.Configure(ctx, cfg("master", "")); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx, mh); err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx)
	c2 := cfg("slave", addr)
	c2.Addr = ""
	if err := s.Configure(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, sh); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	hp := netip.MustParseAddrPort("127.0.0.1:1")
	deadline := time.Now().Add(10 * time.Second)
	for mh.InSync() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	send := func(i int) {
		r, err := ms.Append(&record.Message{Topic: "T", Body: []byte(fmt.Sprint(i)), BornHost: hp, StoreHost: hp})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = mh.WaitReplicated(wctx, r.End())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 200; i++ { // warm up
		send(i)
	}
	calls := func() (n uint64) {
		for _, r := range []sdk.Replicator{m, s} {
			if lc, ok := r.(interface{ LaneCalls() uint64 }); ok {
				n += lc.LaneCalls()
			}
		}
		return n
	}
	before := calls()
	t.ResetTimer()
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := p; i < t.N; i += producers {
				send(i)
			}
		}(p)
	}
	wg.Wait()
	t.StopTimer()
	t.ReportMetric(float64(calls()-before)/float64(t.N), "lane-calls/msg")
}
