package core

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// TestMirrorCommitted: the mirror gets the committed offset at once, then
// every change (appends from many goroutines, a write-buffer commit,
// replicated bytes, a truncation), never a value above the committed
// offset outside Truncate, and nothing after stop.
func TestMirrorCommitted(t *testing.T) {
	for _, wb := range []int{0, 64 << 10} {
		t.Run(fmt.Sprintf("write_buffer=%d", wb), func(t *testing.T) {
			o := testOptions(vfs.NewCrashFS(5), "/m")
			o.WriteBuffer = wb
			s := mustOpen(t, o)
			defer s.Close()
			var last, calls atomic.Int64
			var over atomic.Value
			cutting := atomic.Bool{}
			stop := s.MirrorCommitted(func(c int64) {
				calls.Add(1)
				if cur := s.committed.Load(); c > cur && !cutting.Load() {
					over.Store(fmt.Sprintf("mirrored %d above committed %d", c, cur))
				}
				last.Store(c)
			})
			if calls.Load() != 1 || last.Load() != 0 {
				t.Fatalf("registration: %d calls, value %d; want the current offset 0 once", calls.Load(), last.Load())
			}
			var wg sync.WaitGroup
			var mid atomic.Int64
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 200; i++ {
						r, err := s.Append(msg("T", int32(g), fmt.Sprint(g, i)))
						if err != nil {
							t.Error(err)
							return
						}
						if g == 0 && i == 100 {
							mid.Store(r.PhysOffset)
						}
					}
				}()
			}
			wg.Wait()
			if _, err := s.Commit(); err != nil {
				t.Fatal(err)
			}
			if got, want := last.Load(), s.committed.Load(); got != want || want == 0 {
				t.Fatalf("after the appends the mirror holds %d, committed is %d", got, want)
			}
			drain(t, s)
			cutting.Store(true)
			if err := s.Truncate(mid.Load()); err != nil {
				t.Fatal(err)
			}
			cutting.Store(false)
			if got := last.Load(); got != mid.Load() || s.committed.Load() != mid.Load() {
				t.Fatalf("after Truncate(%d) the mirror holds %d, committed %d", mid.Load(), got, s.committed.Load())
			}
			if v := over.Load(); v != nil {
				t.Fatal(v)
			}
			stop()
			stop() // twice is fine
			n := calls.Load()
			if _, err := s.Append(msg("T", 0, "after")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(); err != nil {
				t.Fatal(err)
			}
			if calls.Load() != n {
				t.Fatalf("mirror called after stop")
			}
		})
	}
}
