package offwait

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func closed(w *waiter) bool {
	select {
	case <-w.done():
		return true
	default:
		return false
	}
}

func TestReleaseOnlyReached(t *testing.T) {
	var ws Waiters
	a, b, c := ws.add(100), ws.add(50), ws.add(200)
	ws.Release(120)
	if !closed(a) || !closed(b) {
		t.Fatal("waiters at 100 and 50 not released at 120")
	}
	if closed(c) {
		t.Fatal("waiter at 200 released at 120")
	}
	d := ws.add(150)
	ws.remove(d)
	ws.remove(d) // twice is a no-op
	ws.Release(1000)
	if !closed(c) || closed(d) {
		t.Fatalf("after release(1000): c=%v d(removed)=%v", closed(c), closed(d))
	}
	if n := ws.Len(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
	e := ws.add(5000)
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
				w := ws.add(int64(g*1000 + i))
				if i%3 == 0 {
					ws.remove(w)
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

// counter records the calls of a Notify callback.
type counter struct {
	calls atomic.Int32
	ok    atomic.Bool
	done  chan struct{}
}

func newCounter() *counter { return &counter{done: make(chan struct{}, 10)} }

func (c *counter) fn(ok bool) {
	c.calls.Add(1)
	c.ok.Store(ok)
	c.done <- struct{}{}
}

func TestNotify(t *testing.T) {
	var ws Waiters
	var pos atomic.Int64
	reached := func(off int64) func() bool { return func() bool { return pos.Load() >= off } }

	// Already reached: called at once.
	pos.Store(10)
	c := newCounter()
	ws.Notify(5, time.Hour, reached(5), c.fn)
	if c.calls.Load() != 1 || !c.ok.Load() {
		t.Fatalf("reached offset: %d calls, ok=%v", c.calls.Load(), c.ok.Load())
	}

	// Released by a Release that reaches it, once; the timer does not
	// call it again.
	c = newCounter()
	ws.Notify(20, 50*time.Millisecond, reached(20), c.fn)
	if c.calls.Load() != 0 {
		t.Fatal("called before the offset was reached")
	}
	pos.Store(20)
	ws.Release(20)
	<-c.done
	time.Sleep(100 * time.Millisecond)
	if c.calls.Load() != 1 || !c.ok.Load() {
		t.Fatalf("released: %d calls, ok=%v", c.calls.Load(), c.ok.Load())
	}

	// Timed out: fn(false) once, and a later Release does not call it.
	c = newCounter()
	ws.Notify(30, 10*time.Millisecond, reached(30), c.fn)
	<-c.done
	pos.Store(30)
	ws.Release(30)
	if c.calls.Load() != 1 || c.ok.Load() {
		t.Fatalf("timed out: %d calls, ok=%v", c.calls.Load(), c.ok.Load())
	}

	// ReleaseAll with the offset not reached: fn(false).
	c = newCounter()
	ws.Notify(40, time.Hour, reached(40), c.fn)
	ws.ReleaseAll()
	<-c.done
	if c.calls.Load() != 1 || c.ok.Load() {
		t.Fatalf("ReleaseAll: %d calls, ok=%v", c.calls.Load(), c.ok.Load())
	}
	if n := ws.Len(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}

// TestNotifyExactlyOnce races releases against timeouts: every callback
// runs exactly once, with ok true exactly when the offset was reached
// before the timer fired.
func TestNotifyExactlyOnce(t *testing.T) {
	var ws Waiters
	var pos atomic.Int64
	const n = 2000
	calls := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		off := int64(i + 1)
		go ws.Notify(off, time.Duration(i%7)*100*time.Microsecond, func() bool { return pos.Load() >= off }, func(ok bool) {
			calls[i].Add(1)
			if ok && pos.Load() < off {
				t.Errorf("waiter %d told ok below its offset", off)
			}
			wg.Done()
		})
	}
	for p := int64(0); p <= n; p += 7 {
		pos.Store(p)
		ws.Release(p)
	}
	pos.Store(n)
	ws.Release(n)
	wg.Wait()
	for i := range calls {
		if c := calls[i].Load(); c != 1 {
			t.Fatalf("waiter %d called %d times", i+1, c)
		}
	}
	time.Sleep(5 * time.Millisecond)
	for i := range calls {
		if c := calls[i].Load(); c != 1 {
			t.Fatalf("waiter %d called %d times after the timers", i+1, c)
		}
	}
}

func TestWait(t *testing.T) {
	var ws Waiters
	var pos atomic.Int64
	reached := func() bool { return pos.Load() >= 10 }
	ctx := context.Background()

	pos.Store(10)
	if err := ws.Wait(ctx, 10, reached, nil); err != nil {
		t.Fatalf("already reached: %v", err)
	}
	pos.Store(0)
	done := make(chan error, 1)
	go func() { done <- ws.Wait(ctx, 10, reached, nil) }()
	time.Sleep(5 * time.Millisecond)
	pos.Store(10)
	ws.Release(10)
	if err := <-done; err != nil {
		t.Fatalf("released: %v", err)
	}

	pos.Store(0)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	if err := ws.Wait(cctx, 10, reached, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := ws.Wait(ctx, 10, reached, stop); !errors.Is(err, ErrStopped) {
		t.Fatalf("stop: %v", err)
	}
	if n := ws.Len(); n != 0 {
		t.Fatalf("%d waiters left behind", n)
	}
}
