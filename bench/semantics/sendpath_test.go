package semantics

import (
	"context"
	"os"
	"strconv"
	"syscall"
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
// reported, and the CPU time the process (node and generator) spent per
// message while sending, which a machine shared with other work disturbs
// less than the rate. KEEL_BENCH_SENDPATH_WINDOW (a duration, say 60s) spreads the
// timers' delays over [MinDelay, window] as the semantics part does, so
// that deliveries overlap the sends; KEEL_BENCH_SENDPATH_PROFILE names
// another profile (a path) than default. With -cpuprofile the broker's share of the difference shows
// (the node runs in the benchmark's process):
//
//	go test -run NONE -bench SendPath -benchtime=1x -cpuprofile /tmp/cpu.pprof ./bench/semantics/
func BenchmarkSendPath(b *testing.B) {
	count := int64(60_000)
	if v, err := strconv.ParseInt(os.Getenv("KEEL_BENCH_SENDPATH_COUNT"), 10, 64); err == nil && v > 0 {
		count = v
	}
	delay := func(uint64) time.Duration { return 100 * time.Second }
	if v := os.Getenv("KEEL_BENCH_SENDPATH_WINDOW"); v != "" {
		w, err := time.ParseDuration(v)
		if err != nil || w < MinDelay {
			b.Fatalf("KEEL_BENCH_SENDPATH_WINDOW=%q: want a duration of at least %v", v, MinDelay)
		}
		delay = Delay(w)
	}
	prof := os.Getenv("KEEL_BENCH_SENDPATH_PROFILE")
	if prof == "" {
		prof = profile(b)
	}
	for _, timers := range []bool{false, true} {
		name := "plain"
		if timers {
			name = "timer"
		}
		b.Run(name, func(b *testing.B) {
			var sent int64
			var busy, cpu time.Duration
			for range b.N {
				err := wire.WithNode(context.Background(), wire.NodeSpec{Profile: prof, Dir: b.TempDir(), Queues: 8}, func(n *host.Node) error {
					ls := wire.LoadSpec{Addr: n.Addr("broker"), Producers: 64, BodyBytes: 128, Duration: time.Minute, Count: count}
					if timers {
						ls.TimerDelay = delay
					}
					if err := wire.Prime(context.Background(), ls); err != nil {
						return err
					}
					cpu0 := processCPU(b)
					r, err := wire.Load(context.Background(), ls)
					if err != nil {
						return err
					}
					cpu += processCPU(b) - cpu0
					sent += r.Msgs
					busy += r.Elapsed
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sent)/busy.Seconds(), "msgs/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(sent), "cpu-us/msg")
		})
	}
}

// processCPU is the user and system CPU time the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
