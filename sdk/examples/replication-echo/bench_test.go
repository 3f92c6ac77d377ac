package echo_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk"
	echo "github.com/keelmq/keel/sdk/examples/replication-echo"
	"github.com/keelmq/keel/sdk/storehost"
)

// benchStore opens a store with its host in a temporary directory.
func benchStore(b testing.TB) (*core.Store, *storehost.Host) {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var clock atomic.Int64
	clock.Store(1_700_000_000_000)
	s, err := core.Open(core.Options{Dir: b.TempDir(), SegmentSize: 64 << 20, CQEntriesPerFile: 1 << 16, MaxMessageSize: 64 << 10,
		Logger: log, Now: func() int64 { return clock.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, storehost.New(s, log)
}

func freeAddr(b testing.TB) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// countingHost counts the Host calls a plugin makes: run external, each
// is a round trip across the process boundary, so calls per acknowledged
// message say what the boundary will cost.
type countingHost struct {
	sdk.Host
	calls atomic.Int64
}

func (h *countingHost) Positions(ctx context.Context) (sdk.Positions, error) {
	h.calls.Add(1)
	return h.Host.Positions(ctx)
}

func (h *countingHost) WaitCommitted(ctx context.Context, after int64) (int64, error) {
	h.calls.Add(1)
	return h.Host.WaitCommitted(ctx, after)
}

func (h *countingHost) ReadLog(ctx context.Context, from int64, maxBytes int) ([]byte, error) {
	h.calls.Add(1)
	return h.Host.ReadLog(ctx, from, maxBytes)
}

func (h *countingHost) AppendLog(ctx context.Context, offset int64, data []byte) error {
	h.calls.Add(1)
	return h.Host.AppendLog(ctx, offset, data)
}

func (h *countingHost) ReportReplication(ctx context.Context, st sdk.ReplicationState) error {
	h.calls.Add(1)
	return h.Host.ReportReplication(ctx, st)
}

// startEcho configures and starts an echo instance in role on host, with
// the [replication.config] table conf (the defaults when empty).
func startEcho(b testing.TB, host sdk.Host, role, addr, peer, conf string) *echo.Plugin {
	b.Helper()
	p := echo.New()
	cfg := sdk.Config{Name: "echo", Section: "replication", Role: role, Addr: addr, PeerAddr: peer, Secret: "bench",
		Document: []byte("[replication.config]\n" + conf + "\n"), DataDir: b.TempDir()}
	ctx := context.Background()
	if err := p.Configure(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	if err := p.Start(ctx, host); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

// BenchmarkSyncAck: producers append 1 KiB records on the master and
// each waits for the slave's acknowledgement (wait_replicas = 1) before
// its next append, in-process over loopback. It reports acknowledged
// messages per second, the median and p99 latency of an
// acknowledgement, and the Host calls per message of the master and of
// the slave (each a round trip when the plugin runs external); ns/op is
// per message.
func BenchmarkSyncAck(b *testing.B) {
	for _, producers := range []int{1, 16} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			ms, mh := benchStore(b)
			_, sh := benchStore(b)
			addr := freeAddr(b)
			mc, sc := &countingHost{Host: mh}, &countingHost{Host: sh}
			startEcho(b, mc, "master", addr, "", "wait_replicas = 1")
			startEcho(b, sc, "slave", "", addr, "wait_replicas = 1")
			deadline := time.Now().Add(5 * time.Second)
			for mh.InSync() < 1 {
				if time.Now().After(deadline) {
					b.Fatal("the slave did not connect")
				}
				time.Sleep(time.Millisecond)
			}
			host := netip.MustParseAddrPort("127.0.0.1:10911")
			body := make([]byte, 1024)
			var next atomic.Int64
			lat := make([][]time.Duration, producers)
			var failed atomic.Int64
			b.ResetTimer()
			mc.calls.Store(0)
			sc.calls.Store(0)
			begin := time.Now()
			var wg sync.WaitGroup
			for g := range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := &record.Message{Topic: "Bench", QueueID: int32(g % 8), Body: body, BornHost: host, StoreHost: host, BornTimestamp: 1}
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						r, err := ms.Append(m)
						if err != nil {
							failed.Add(1)
							return
						}
						ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
						if mh.WaitReplicated(ctx, r.End()) != nil {
							failed.Add(1)
						}
						cancel()
						lat[g] = append(lat[g], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(begin)
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d acknowledgements failed", n)
			}
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-ack-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-ack-µs")
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acked-msgs/s")
			b.ReportMetric(float64(mc.calls.Load())/float64(b.N), "master-host-calls/msg")
			b.ReportMetric(float64(sc.calls.Load())/float64(b.N), "slave-host-calls/msg")
		})
	}
}
