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
	"sync"
)

// Waiters is a set of waiters. The zero value is empty and ready; all
// methods are safe for concurrent use.
type Waiters struct {
	mu sync.Mutex
	h  waiterHeap
}

// Waiter is one registered wait. Done is closed when it is released.
type Waiter struct {
	Off int64
	ch  chan struct{}
	idx int // position in the heap, -1 once released or removed
}

// Done returns the channel Release or ReleaseAll closes.
func (w *Waiter) Done() <-chan struct{} { return w.ch }

type waiterHeap []*Waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].Off < h[j].Off }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*Waiter)
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

// Add registers a waiter for off. The caller must check the offset again
// after Add (it may have been reached just before) and Remove the waiter
// when it stops waiting without being released.
func (ws *Waiters) Add(off int64) *Waiter {
	w := &Waiter{Off: off, ch: make(chan struct{})}
	ws.mu.Lock()
	heap.Push(&ws.h, w)
	ws.mu.Unlock()
	return w
}

// Remove unregisters w if it is still waiting; it is a no-op otherwise.
func (ws *Waiters) Remove(w *Waiter) {
	ws.mu.Lock()
	if w.idx >= 0 {
		heap.Remove(&ws.h, w.idx)
	}
	ws.mu.Unlock()
}

// Release wakes every waiter whose offset is <= reached.
func (ws *Waiters) Release(reached int64) {
	ws.mu.Lock()
	for len(ws.h) > 0 && ws.h[0].Off <= reached {
		close(heap.Pop(&ws.h).(*Waiter).ch)
	}
	ws.mu.Unlock()
}

// ReleaseAll wakes every waiter (shutdown, or the offset moved backwards);
// each must check the offset itself.
func (ws *Waiters) ReleaseAll() {
	ws.mu.Lock()
	for len(ws.h) > 0 {
		close(heap.Pop(&ws.h).(*Waiter).ch)
	}
	ws.mu.Unlock()
}

// Len is the number of registered waiters.
func (ws *Waiters) Len() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.h)
}
