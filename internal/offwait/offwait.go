// Package offwait releases goroutines waiting for a monotonically growing
// offset (a flushed or replicated position) to reach their own target.
//
// Waiters sit in a min-heap by target, so a release wakes only those whose
// target was reached: a group commit or a replica's ack that covers some of
// many waiting producers does not wake the others to find they must wait
// again. core uses it for WaitFlushed, sdk/storehost for WaitReplicated.
package offwait

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// Waiters is a set of waiters. The zero value is empty and ready; all
// methods are safe for concurrent use.
type Waiters struct {
	mu sync.Mutex
	h  waiterHeap
	// Notify's deadlines: every Notify waiter is also queued here in
	// arrival order, and one timer fires at the earliest pending deadline
	// (no timer per waiter). Released waiters are trimmed from the front.
	timed   []*waiter
	timer   *time.Timer
	timerAt int64 // unix ns the timer is set for; 0 when not armed
}

// waiter is one registered wait: its channel is closed when it is
// released (Wait's waiters), or its function is called (Notify's).
type waiter struct {
	off      int64
	ch       chan struct{}
	fn       func()
	deadline int64 // Notify waiters: unix ns after which they time out
	idx      int   // position in the heap, -1 once released or removed
}

// done returns the channel Release or ReleaseAll closes.
func (w *waiter) done() <-chan struct{} { return w.ch }

type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].off < h[j].off }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.idx = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.idx = -1
	return w
}

// add registers a waiter for off. The caller must check the offset again
// after add (it may have been reached just before) and remove the waiter
// when it stops waiting without being released.
func (ws *Waiters) add(off int64) *waiter {
	w := &waiter{off: off, ch: make(chan struct{})}
	ws.mu.Lock()
	heap.Push(&ws.h, w)
	ws.mu.Unlock()
	return w
}

// remove unregisters w if it is still waiting and reports whether it was:
// true means w was neither released nor removed before, so nobody else
// will close its channel or call its function.
func (ws *Waiters) remove(w *waiter) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.idx < 0 {
		return false
	}
	heap.Remove(&ws.h, w.idx)
	return true
}

// Release wakes every waiter whose offset is <= reached.
func (ws *Waiters) Release(reached int64) {
	var fns []func()
	ws.mu.Lock()
	for len(ws.h) > 0 && ws.h[0].off <= reached {
		fns = wake(heap.Pop(&ws.h).(*waiter), fns)
	}
	ws.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// ReleaseAll wakes every waiter (shutdown, or the offset moved backwards);
// each must check the offset itself.
func (ws *Waiters) ReleaseAll() {
	var fns []func()
	ws.mu.Lock()
	for len(ws.h) > 0 {
		fns = wake(heap.Pop(&ws.h).(*waiter), fns)
	}
	ws.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func wake(w *waiter, fns []func()) []func() {
	if w.fn != nil {
		return append(fns, w.fn)
	}
	close(w.ch)
	return fns
}

// ErrStopped is Wait's error when its stop channel closed first.
var ErrStopped = errors.New("offwait: stopped")

// Wait blocks until reached() holds, checked at once, after registering
// (a Release may have come just before) and whenever a Release or
// ReleaseAll wakes it, or until ctx ends (ctx's error) or stop closes
// (ErrStopped; nil stop never closes). A wake-up by ReleaseAll with
// reached() false returns nil too: the caller re-checks its offset (an
// offset moved backwards means what it waited for is gone).
func (ws *Waiters) Wait(ctx context.Context, off int64, reached func() bool, stop <-chan struct{}) error {
	if reached() {
		return nil
	}
	w := ws.add(off)
	if reached() {
		ws.remove(w)
		return nil
	}
	select {
	case <-w.done():
		return nil
	case <-ctx.Done():
		ws.remove(w)
		return ctx.Err()
	case <-stop:
		ws.remove(w)
		return ErrStopped
	}
}

// Notify calls fn exactly once: fn(true) once reached() holds (at once,
// on the caller's goroutine, if it already does; otherwise on the
// goroutine of the Release that reaches off), or fn(false) after timeout
// (on a timer goroutine; fn(true) instead if the offset was reached just
// then), or at a ReleaseAll with reached() still false. reached reports whether
// the offset has reached off; Release's callers make it true before they
// release. No goroutine waits meanwhile and no timer is made per call
// (one timer per Waiters serves every deadline): it is how an
// acknowledgement is sent without a goroutine per message.
func (ws *Waiters) Notify(off int64, timeout time.Duration, reached func() bool, fn func(ok bool)) {
	if reached() {
		fn(true)
		return
	}
	w := &waiter{off: off, fn: func() { fn(reached()) }, deadline: time.Now().Add(timeout).UnixNano()}
	ws.mu.Lock()
	heap.Push(&ws.h, w)
	ws.timed = append(ws.timed, w)
	ws.trimLocked()
	ws.armLocked(w.deadline)
	ws.mu.Unlock()
	if reached() && ws.remove(w) {
		fn(true)
	}
}

// trimLocked drops released or removed waiters from the front of timed,
// and compacts it when most of it is dropped.
func (ws *Waiters) trimLocked() {
	i := 0
	for i < len(ws.timed) && ws.timed[i].idx < 0 {
		ws.timed[i] = nil
		i++
	}
	if i > 0 {
		ws.timed = ws.timed[i:]
	}
	if cap(ws.timed) > 64 && len(ws.timed) < cap(ws.timed)/4 {
		ws.timed = append([]*waiter(nil), ws.timed...)
	}
}

// armLocked makes the timer fire no later than at (unix ns).
func (ws *Waiters) armLocked(at int64) {
	if ws.timerAt != 0 && ws.timerAt <= at {
		return
	}
	d := time.Duration(at - time.Now().UnixNano())
	if ws.timer == nil {
		ws.timer = time.AfterFunc(d, ws.expire)
	} else {
		ws.timer.Reset(d)
	}
	ws.timerAt = at
}

// expire times out every Notify waiter whose deadline passed and re-arms
// the timer for the earliest one left.
func (ws *Waiters) expire() {
	var fns []func()
	now := time.Now().UnixNano()
	ws.mu.Lock()
	ws.timerAt = 0
	var next int64
	kept := ws.timed[:0]
	for _, w := range ws.timed {
		switch {
		case w.idx < 0:
			continue
		case w.deadline <= now:
			heap.Remove(&ws.h, w.idx)
			fns = append(fns, w.fn)
			continue
		}
		if next == 0 || w.deadline < next {
			next = w.deadline
		}
		kept = append(kept, w)
	}
	clear(ws.timed[len(kept):])
	ws.timed = kept
	if next != 0 {
		ws.armLocked(next)
	}
	ws.mu.Unlock()
	for _, f := range fns {
		f() // fn(reached()): false unless the offset was reached just now
	}
}

// Len is the number of registered waiters.
func (ws *Waiters) Len() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.h)
}
