package offwait

import (
	"sync"
	"testing"
)

func closed(w *Waiter) bool {
	select {
	case <-w.Done():
		return true
	default:
		return false
	}
}

func TestReleaseOnlyReached(t *testing.T) {
	var ws Waiters
	a, b, c := ws.Add(100), ws.Add(50), ws.Add(200)
	ws.Release(120)
	if !closed(a) || !closed(b) {
		t.Fatal("waiters at 100 and 50 not released at 120")
	}
	if closed(c) {
		t.Fatal("waiter at 200 released at 120")
	}
	d := ws.Add(150)
	ws.Remove(d)
	ws.Remove(d) // twice is a no-op
	ws.Release(1000)
	if !closed(c) || closed(d) {
		t.Fatalf("after release(1000): c=%v d(removed)=%v", closed(c), closed(d))
	}
	if n := ws.Len(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
	e := ws.Add(5000)
	ws.ReleaseAll()
	if !closed(e) {
		t.Fatal("ReleaseAll left a waiter")
	}
}

// TestConcurrent: many goroutines adding, removing and releasing; every
// waiter whose offset is reached by the final release is woken.
func TestConcurrent(t *testing.T) {
	var ws Waiters
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				w := ws.Add(int64(g*1000 + i))
				if i%3 == 0 {
					ws.Remove(w)
				}
				if i%50 == 0 {
					ws.Release(int64(g * 1000))
				}
			}
		}(g)
	}
	wg.Wait()
	ws.Release(1 << 40)
	if n := ws.Len(); n != 0 {
		t.Fatalf("%d waiters left after releasing everything", n)
	}
}
