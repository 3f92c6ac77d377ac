// Command recprobe measures the core store's restart time after kill -9,
// without the benchmark harness around it:
//
//	go run ./bench/cmd/recprobe DIR fill 8   # 4 appenders of 4 KiB bodies, async flush every 500 ms, until 8 GiB; then SIGKILL itself
//	go run ./bench/cmd/recprobe DIR open     # time core.Open (crash recovery) and print what it did
//
// A CPU profile of the open goes to DIR.cpu.prof.
package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

func main() {
	dir, mode := os.Args[1], os.Args[2]
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if mode == "fill" {
		gib, _ := strconv.Atoi(os.Args[3])
		h := netip.MustParseAddrPort("127.0.0.1:1")
		s, err := core.Open(core.Options{Dir: dir, FlushInterval: 500 * time.Millisecond, Logger: log})
		if err != nil {
			panic(err)
		}
		done := make(chan bool)
		for g := 0; g < 4; g++ {
			go func(g int) {
				m := &record.Message{Topic: "T", Body: make([]byte, 4096), BornHost: h, StoreHost: h}
				for i := 0; s.Positions().Committed < int64(gib)<<30; i++ {
					m.QueueID = int32(g*2 + i%2)
					if _, err := s.Append(m); err != nil {
						panic(err)
					}
				}
				done <- true
			}(g)
		}
		<-done
		fmt.Fprintf(os.Stderr, "filled: %+v\n", s.Positions())
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	f, _ := os.Create(dir + ".cpu.prof")
	pprof.StartCPUProfile(f)
	t0 := time.Now()
	s, err := core.Open(core.Options{Dir: dir, Logger: log})
	d := time.Since(t0)
	pprof.StopCPUProfile()
	if err != nil {
		panic(err)
	}
	fmt.Printf("open took %v recovery %+v\n", d, s.Recovery())
	s.Close()
}
