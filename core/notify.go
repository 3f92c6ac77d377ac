package core

import (
	"container/heap"
	"sync"
	"sync/atomic"
)

// notifier is a broadcast signal with a cheap fast path: notify costs one
// atomic load when nobody waits. A waiter takes the current channel, checks
// its condition, and blocks on the channel; notify closes it.
type notifier struct {
	ch atomic.Pointer[chan struct{}]
}

// wait returns a channel closed by the next notify after this call.
func (n *notifier) wait() <-chan struct{} {
	for {
		if p := n.ch.Load(); p != nil {
			return *p
		}
		c := make(chan struct{})
		if n.ch.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// notify wakes every goroutine blocked on a channel from wait.
func (n *notifier) notify() {
	if n.ch.Load() == nil {
		return
	}
	if p := n.ch.Swap(nil); p != nil {
		close(*p)
	}
}

// offsetWaiters releases goroutines waiting for an offset to be reached,
// waking only those whose offset was reached (a min-heap by offset), so a
// group commit covering some of many waiting producers does not wake the
// others to find they must wait again.
type offsetWaiters struct {
	mu sync.Mutex
	h  waiterHeap
}

type offsetWaiter struct {
	off int64
	ch  chan struct{}
	idx int // position in the heap, -1 once released or removed
}

type waiterHeap []*offsetWaiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].off < h[j].off }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*offsetWaiter)
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

// add registers a waiter for off.
func (ws *offsetWaiters) add(off int64) *offsetWaiter {
	w := &offsetWaiter{off: off, ch: make(chan struct{})}
	ws.mu.Lock()
	heap.Push(&ws.h, w)
	ws.mu.Unlock()
	return w
}

// remove unregisters w if it is still waiting.
func (ws *offsetWaiters) remove(w *offsetWaiter) {
	ws.mu.Lock()
	if w.idx >= 0 {
		heap.Remove(&ws.h, w.idx)
	}
	ws.mu.Unlock()
}

// release wakes every waiter whose offset is <= reached.
func (ws *offsetWaiters) release(reached int64) {
	ws.mu.Lock()
	for len(ws.h) > 0 && ws.h[0].off <= reached {
		w := heap.Pop(&ws.h).(*offsetWaiter)
		close(w.ch)
	}
	ws.mu.Unlock()
}

// releaseAll wakes everyone (shutdown, or the offset moved backwards).
func (ws *offsetWaiters) releaseAll() {
	ws.mu.Lock()
	for len(ws.h) > 0 {
		close(heap.Pop(&ws.h).(*offsetWaiter).ch)
	}
	ws.mu.Unlock()
}
