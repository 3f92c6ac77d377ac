package core

import (
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
