package host

import (
	"sync"

	"github.com/keelmq/keel/core"
)

// WaitForData implements remoting.Backend with the held-pull table: the
// wait is keyed by topic and queue, so a dispatch to another queue does
// not wake it.
func (b backend) WaitForData(topic string, queueID int32, offset int64) (<-chan struct{}, func()) {
	return b.n.pulls.wait(b.store(), topic, queueID, offset)
}

// pullHolds is a node's table of held pulls by store, topic and queue, as
// RocketMQ's PullRequestHoldService keeps them: one broadcast channel per
// queue someone waits on, closed once the queue's max offset passes the
// lowest offset waited at there. One goroutine per store with waits
// (watch) is woken by the store's dispatch signal and checks only the
// queues in the table; it exits when the table is empty, so a store
// nobody waits on costs nothing.
//
// One mutex guards every table: waits are registered once per held pull
// round, and checks once per dispatch signal.
type pullHolds struct {
	mu     sync.Mutex
	stores map[*core.Store]heldQueues
}

// heldQueues is one store's held pulls; a store is in pullHolds.stores
// exactly while its watch goroutine runs.
type heldQueues map[queueKey]*queueWait

type queueKey struct {
	topic string
	queue int32
}

// queueWait is the wait on one queue.
type queueWait struct {
	// from is the lowest offset waited at: the queue is woken once its
	// max offset passes it.
	from int64
	// ch is closed when the queue is woken (or the store closes); the
	// entry leaves the table then.
	ch chan struct{}
	// n counts the waits registered and not stopped; the entry leaves
	// the table when it drops to 0.
	n int
}

// closedChan is the wake channel of a wait that is over before it began.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func noStop() {}

// wait registers a wait for topic/queue to hold an entry at or after
// offset, following remoting.Backend.WaitForData's contract. Data that is
// already there is answered without registering anything.
func (h *pullHolds) wait(st *core.Store, topic string, queue int32, offset int64) (<-chan struct{}, func()) {
	if st.MaxQueueOffset(topic, queue) > offset {
		return closedChan, noStop
	}
	k := queueKey{topic, queue}
	h.mu.Lock()
	if h.stores == nil {
		h.stores = make(map[*core.Store]heldQueues)
	}
	qs := h.stores[st]
	if qs == nil {
		qs = make(heldQueues)
		h.stores[st] = qs
		go h.watch(st)
	}
	w := qs[k]
	if w == nil {
		w = &queueWait{from: offset, ch: make(chan struct{})}
		qs[k] = w
	}
	w.from = min(w.from, offset)
	w.n++
	h.mu.Unlock()
	stop := func() { h.stop(st, k, w) }
	// A dispatch between the check above and the registration signalled
	// before the wait was in the table: look again. Any later one wakes
	// the watcher, which then sees the wait.
	if st.MaxQueueOffset(topic, queue) > offset {
		stop()
		return closedChan, noStop
	}
	return w.ch, stop
}

// stop ends one wait on w: the entry leaves the table with its last
// wait. w may have been woken and removed already.
func (h *pullHolds) stop(st *core.Store, k queueKey, w *queueWait) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.n--
	if qs := h.stores[st]; w.n == 0 && qs[k] == w {
		delete(qs, k)
	}
}

// watch wakes the waits of st's table whose queues moved, after every
// dispatch signal, until the table is empty or the store closes.
func (h *pullHolds) watch(st *core.Store) {
	for {
		// The signal is taken before the check, so a dispatch during
		// or after it is not missed.
		sig := st.DispatchSignal()
		// A dispatch between taking the signal and the check is seen by
		// the check (it reads each queue's max afterwards) and closes
		// sig, so the loop looks once more; only a closed store wakes
		// every wait (waking all on every such race woke the queues
		// nobody wrote to under a busy dispatcher).
		if !h.check(st, st.Closed()) {
			return
		}
		<-sig
	}
}

// check wakes the waits whose queue holds data past their offset (all of
// them when the store is closed) and reports whether st's watcher is to
// go on; when it is not, st has left the table.
func (h *pullHolds) check(st *core.Store, closed bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	qs := h.stores[st]
	for k, w := range qs {
		if closed || st.MaxQueueOffset(k.topic, k.queue) > w.from {
			close(w.ch)
			delete(qs, k)
		}
	}
	if len(qs) == 0 {
		delete(h.stores, st)
		return false
	}
	return true
}
