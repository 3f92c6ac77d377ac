package wire

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// startPair starts a master node on profile kind+"-master" and a slave on
// kind+"-slave" pointed at the master's HA listener, and waits until the
// master reports the slave in sync. It returns the master's broker
// address and a function that stops both nodes.
func startPair(tb testing.TB, kind string) (string, func()) {
	tb.Helper()
	ctx := context.Background()
	path := func(name string) string {
		p, err := FindProfile(name, profileDir)
		if err != nil {
			tb.Fatal(err)
		}
		return p
	}
	dir := tb.TempDir()
	// The HA listener belongs to the replication plugin, which does not
	// report the port it bound: give it a port that was free a moment ago.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ha := l.Addr().String()
	l.Close()
	master, err := StartNode(ctx, NodeSpec{Profile: path(kind + "-master"), Dir: filepath.Join(dir, "m"), Queues: DefaultQueues, SegmentSize: 256 << 20,
		Overrides: []string{`server.ha_addr="` + ha + `"`}})
	if err != nil {
		tb.Fatal(err)
	}
	slave, err := StartNode(ctx, NodeSpec{Profile: path(kind + "-slave"), Dir: filepath.Join(dir, "s"), Queues: DefaultQueues, SegmentSize: 256 << 20,
		Overrides: []string{`replication.master_addr="` + ha + `"`}})
	if err != nil {
		master.Stop(ctx)
		tb.Fatal(err)
	}
	stop := func() {
		slave.Stop(context.Background())
		master.Stop(context.Background())
	}
	deadline := time.Now().Add(30 * time.Second)
	for master.Status().Replication.InSync < 1 {
		if time.Now().After(deadline) {
			stop()
			tb.Fatalf("%s pair: the slave never got in sync: %+v", kind, master.Status().Replication)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return master.Addr("broker"), stop
}

// BenchmarkWireReplication is issue #6's comparison as a client sees it:
// 64 producers (8 connections × depth 32, 128-byte bodies, like the wire
// part) send to a master over the RocketMQ protocol while a slave node in
// this process replicates from it, with async and with sync replication
// (configs/profiles/{async,sync}-{master,slave}.toml: async flush, sync
// acks wait for the slave's receipt). Rounds alternate the two pairs, each
// on fresh stores; KEEL_BENCH_ROUNDS (default 3) rounds of 3 s. Reports
// medians and sync ÷ async. Run with -benchtime=1x.
func BenchmarkWireReplication(b *testing.B) {
	rounds := benchRounds()
	rates := map[string][]float64{}
	p99 := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for k := range 2 {
				kind := []string{"async", "sync"}[(r+k)%2]
				addr, stop := startPair(b, kind)
				ls := LoadSpec{Addr: addr, Queues: DefaultQueues, Producers: 64, Conns: DefaultConns, Depth: DefaultDepth, BodyBytes: 128,
					Warmup: 500 * time.Millisecond, Duration: 3 * time.Second}
				if err := prime(context.Background(), ls); err != nil {
					stop()
					b.Fatal(err)
				}
				res, err := Load(context.Background(), ls)
				stop()
				if err != nil {
					b.Fatal(err)
				}
				if res.Errors > 0 || res.Statuses[StatusOK] != res.Msgs {
					b.Fatalf("%s: statuses %v (first error %q)", kind, res.Statuses, res.FirstError)
				}
				rates[kind] = append(rates[kind], res.MsgsPerSec)
				p99[kind] = append(p99[kind], float64(res.Latency.Quantile(0.99))/1e3)
			}
		}
	}
	for _, k := range []string{"async", "sync"} {
		b.ReportMetric(median(rates[k]), k+"-msgs/s")
		b.ReportMetric(median(p99[k]), k+"-p99-µs")
	}
	b.ReportMetric(median(rates["sync"])/median(rates["async"]), "sync/async")
	b.ReportMetric(0, "ns/op")
}
