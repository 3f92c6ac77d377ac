package timer

import (
	"sync"

	"github.com/keelmq/keel/core"
)

// handoffSize is the number of timer records the send path can hand the
// enqueue loop ahead of it (32 bytes each, allocated at the first hand-off
// of a run: 1 MiB). An entry the loop has not taken before it is
// overwritten is read from the log instead.
const handoffSize = 1 << 15

// handoff is what the send path tells the enqueue loop about the timer
// records it appended, so that the loop need not read them back from the
// log: a ring of entries by timer queue offset. It is only a cache of what
// the log holds: the loop takes the entry of the offset it is at, or, when
// the ring lacks it (a restart, the loop fell behind, an appender that has
// not reported yet), reads the record from the log as before. It is safe
// for concurrent use.
type handoff struct {
	mu sync.Mutex
	e  []handoffEntry // by queue offset mod handoffSize; nil until the first put
}

type handoffEntry struct {
	queueOffset int64 // +1, so that the zero entry holds nothing
	phys, due   int64
	size        int32
}

// put records that the timer record of the timer queue's entry
// r.QueueOffset, due at dueMs, was appended at r.PhysOffset.
func (h *handoff) put(r core.AppendResult, dueMs int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.e == nil {
		h.e = make([]handoffEntry, handoffSize)
	}
	h.e[r.QueueOffset%handoffSize] = handoffEntry{queueOffset: r.QueueOffset + 1, phys: r.PhysOffset, due: dueMs, size: r.Size}
}

// take appends to dst the entries of queue offsets off, off+1, ... that
// the ring holds, up to cap(dst) of them, stopping at the first it lacks.
func (h *handoff) take(off int64, dst []handoffEntry) []handoffEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.e == nil || off < 0 {
		return dst
	}
	for len(dst) < cap(dst) {
		e := h.e[off%handoffSize]
		if e.queueOffset != off+1 {
			break
		}
		dst = append(dst, e)
		off++
	}
	return dst
}
