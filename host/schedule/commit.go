package schedule

import "sync"

// committer turns durability confirmations of a level's deliveries, which
// may arrive in any order, into the level's committed offset, which only
// moves forward and never past a delivery not yet confirmed.
//
// Each delivered batch (or skipped record) is added with the schedule
// queue offset just past it; confirm marks one durable. The committed
// offset is the offset past the longest confirmed prefix of the additions,
// and set is called with it, under the committer's lock, each time it
// grows. It is safe for concurrent use.
type committer struct {
	mu      sync.Mutex
	set     func(next int64) // called with strictly increasing values, under mu
	base    uint64           // the sequence number of pending[0]
	pending []pending        // the additions not yet committed, in order
	done    int64            // the committed offset (-1: none yet)
}

type pending struct {
	next      int64
	confirmed bool
}

func newCommitter(set func(next int64)) *committer {
	return &committer{set: set, done: -1}
}

// add registers a delivery that ends at schedule queue offset next (next
// must not be below any earlier addition's) and returns its sequence
// number for confirm.
func (c *committer) add(next int64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, pending{next: next})
	return c.base + uint64(len(c.pending)) - 1
}

// confirm marks addition seq durable and commits the confirmed prefix.
// Confirming a sequence number twice, or one already committed, does
// nothing.
func (c *committer) confirm(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq < c.base || seq-c.base >= uint64(len(c.pending)) {
		return
	}
	c.pending[seq-c.base].confirmed = true
	n := 0
	for n < len(c.pending) && c.pending[n].confirmed {
		n++
	}
	if n == 0 {
		return
	}
	next := c.pending[n-1].next
	c.pending = append(c.pending[:0], c.pending[n:]...)
	c.base += uint64(n)
	if next > c.done {
		c.done = next
		c.set(next)
	}
}

// idle reports whether every addition is committed.
func (c *committer) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) == 0
}
