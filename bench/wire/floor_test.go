package wire

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/peers"
)

// startFloorServer is StartFloor for a test or benchmark: stopped at
// its cleanup.
func startFloorServer(tb testing.TB) string {
	addr, stop, err := StartFloor()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stop() })
	return addr
}

// BenchmarkWireFloor compares, in alternating rounds of the same run, the
// generator against (a) the protocol alone (startFloorServer), (b) a keel
// node on the default profile and (c) embedded NATS JetStream R1 default,
// at 64 producers and 128-byte bodies as the wire part of keel bench runs
// them. The floor bounds what any broker behind keel's remoting server
// could reach on this machine. Run with -benchtime=1x; KEEL_BENCH_ROUNDS
// (default 3) rounds of 3 s each.
func BenchmarkWireFloor(b *testing.B) {
	rounds := benchRounds()
	const producers, body = 64, 128
	dur, warm := 3*time.Second, 500*time.Millisecond
	path, err := FindProfile("default", profileDir)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	load := func(addr string) float64 {
		r, err := Load(ctx, LoadSpec{Addr: addr, Producers: producers, Conns: DefaultConns, Depth: DefaultDepth, BodyBytes: body, Warmup: warm, Duration: dur})
		if err != nil {
			b.Fatal(err)
		}
		return r.MsgsPerSec
	}
	systems := []struct {
		name string
		run  func(round int) float64
	}{
		{"floor", func(int) float64 { return load(startFloorServer(b)) }},
		{"keel", func(round int) float64 {
			r, err := Run(ctx, Spec{Node: NodeSpec{Profile: path, Dir: filepath.Join(b.TempDir(), "node"), Queues: DefaultQueues},
				Load: LoadSpec{Queues: DefaultQueues, Producers: producers, Conns: DefaultConns, Depth: DefaultDepth, BodyBytes: body, Warmup: warm, Duration: dur}})
			if err != nil {
				b.Fatal(err)
			}
			return r.MsgsPerSec
		}},
		{"nats", func(round int) float64 {
			r, err := peers.Run(ctx, peers.Spec{System: "nats", Config: NATSConfig, Dir: filepath.Join(b.TempDir(), "nats"), Producers: producers, BodyBytes: body, Warmup: warm, Duration: dur})
			if err != nil {
				b.Fatal(err)
			}
			return r.MsgsPerSec
		}},
	}
	rates := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for k := range systems {
				s := systems[(r+k)%len(systems)]
				rates[s.name] = append(rates[s.name], s.run(r))
			}
		}
	}
	for _, s := range systems {
		b.ReportMetric(median(rates[s.name]), s.name+"-msgs/s")
	}
	b.ReportMetric(median(rates["floor"])/median(rates["nats"]), "floor/nats")
	b.ReportMetric(median(rates["keel"])/median(rates["nats"]), "keel/nats")
	b.ReportMetric(0, "ns/op")
}
