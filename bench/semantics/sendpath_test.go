package semantics

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/wire"
	"github.com/keelmq/keel/host"
)

// BenchmarkSendPath isolates what a timer costs on the send path: the
// same count of plain and of timer messages (all due 100s after the send,
// so that nothing is delivered while they are sent) from 64 producers to
// fresh nodes of the default profile. Each iteration sends
// KEEL_BENCH_SENDPATH_COUNT messages (default 60 000); msgs/s is
// reported. With -cpuprofile the broker's share of the difference shows
// (the node runs in the benchmark's process):
//
//	go test -run NONE -bench SendPath -benchtime=1x -cpuprofile /tmp/cpu.pprof ./bench/semantics/
func BenchmarkSendPath(b *testing.B) {
	count := int64(60_000)
	if v, err := strconv.ParseInt(os.Getenv("KEEL_BENCH_SENDPATH_COUNT"), 10, 64); err == nil && v > 0 {
		count = v
	}
	for _, timers := range []bool{false, true} {
		name := "plain"
		if timers {
			name = "timer"
		}
		b.Run(name, func(b *testing.B) {
			var sent int64
			var busy time.Duration
			for range b.N {
				err := wire.WithNode(context.Background(), wire.NodeSpec{Profile: profile(b), Dir: b.TempDir(), Queues: 8}, func(n *host.Node) error {
					ls := wire.LoadSpec{Addr: n.Addr("broker"), Producers: 64, BodyBytes: 128, Duration: time.Minute, Count: count}
					if timers {
						ls.TimerDelay = func(uint64) time.Duration { return 100 * time.Second }
					}
					if err := wire.Prime(context.Background(), ls); err != nil {
						return err
					}
					r, err := wire.Load(context.Background(), ls)
					if err != nil {
						return err
					}
					sent += r.Msgs
					busy += r.Elapsed
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sent)/busy.Seconds(), "msgs/s")
		})
	}
}
