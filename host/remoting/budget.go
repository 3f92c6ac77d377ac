package remoting

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultRequestBudget is the default limit on the request bytes the
// servers sharing one Budget hold at once (256 MiB).
const DefaultRequestBudget = 256 << 20

// Budget bounds the memory that incoming requests hold across every
// connection of the servers that share it. A frame's bytes are reserved as
// they arrive, before the buffer that holds them grows (see readCommand),
// and released once nothing in the server refers to them any more (see
// ServerConfig.Budget for exactly when). When a reservation does not fit,
// the connection's reader waits for it without reading further: the
// client's writes stop at its TCP window, which is the back-pressure.
// Waiters are served in arrival order, so a large frame is not starved by
// a stream of small ones.
//
// Because a frame is reserved piece by piece, frames that are still being
// read could between them fill the budget and wait for each other forever.
// Two rules prevent that:
//
//   - Frames still being read hold together at most the stream share,
//     Limit minus the largest frame any server using the budget accepts
//     (its MaxFrame), not counting the lane holder below. A frame whose
//     next piece would exceed the share waits for the lane instead.
//   - One frame at a time holds the lane: its pieces bypass the share and
//     go ahead of every waiter, and the room it needs (at most one
//     MaxFrame) is always left by the share, so it can always be read to
//     its end once finished requests release their bytes.
//
// A frame whose bytes have all arrived when its reading starts (small
// frames, up to the connection's 64 KiB read buffer) is reserved in one
// piece and never counts against the share. So a connection that
// announces a frame and then sends slowly, or nothing, holds only what it
// has sent, and frames stalled in the middle never stop small requests on
// other connections unless what they have really sent fills the budget.
//
// A reservation larger than the whole limit can never be granted; Acquire
// refuses it at once rather than waiting forever.
//
// All methods are safe for concurrent use. The zero value is not usable;
// call NewBudget.
type Budget struct {
	limit int64

	used    atomic.Int64
	peak    atomic.Int64
	nwait   atomic.Int64 // waiters queued (fast path only when 0)
	waits   atomic.Uint64
	refused atomic.Uint64

	// maxFrame is the largest MaxFrame of the servers using the budget;
	// streaming is what the frames being read hold, the lane holder's
	// excepted (at most limit-maxFrame); lane is the token of the one
	// frame that may exceed that share.
	maxFrame  atomic.Int64
	streaming atomic.Int64
	lane      chan struct{}

	mu      sync.Mutex
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the reservation is granted
}

// NewBudget returns a budget of limit bytes; limit <= 0 means
// DefaultRequestBudget.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultRequestBudget
	}
	return &Budget{limit: limit, lane: make(chan struct{}, 1)}
}

// BudgetStats is a snapshot of a Budget.
type BudgetStats struct {
	// Limit is the budget in bytes.
	Limit int64
	// Buffered is the number of bytes reserved now.
	Buffered int64
	// Peak is the highest Buffered ever seen. It never exceeds Limit.
	Peak int64
	// Waits counts reservations that had to wait for room.
	Waits uint64
	// Refused counts reservations larger than Limit, refused outright.
	Refused uint64
	// Streaming is the part of Buffered held by frames still being read,
	// not counting the frame that holds the lane (see Budget).
	Streaming int64
}

// Stats returns the budget's current figures.
func (b *Budget) Stats() BudgetStats {
	return BudgetStats{Limit: b.limit, Buffered: b.used.Load(), Peak: b.peak.Load(),
		Waits: b.waits.Load(), Refused: b.refused.Load(), Streaming: b.streaming.Load()}
}

// Limit is the budget in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// tryAcquire takes n bytes if they fit now.
func (b *Budget) tryAcquire(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			for p := b.peak.Load(); u+n > p && !b.peak.CompareAndSwap(p, u+n); p = b.peak.Load() {
			}
			return true
		}
	}
}

// errOverBudget is wrapped, with ErrFrameTooLarge, by a reservation larger
// than the whole budget.
func (b *Budget) errOverBudget(n int64) error {
	return fmt.Errorf("frame of %d bytes exceeds the whole request memory budget of %d bytes (server.request_buffer_budget): %w", n, b.limit, ErrFrameTooLarge)
}

// TryAcquire takes n bytes if they fit now without waiting and no earlier
// reservation is waiting; it reports whether it did.
func (b *Budget) TryAcquire(n int64) bool {
	return b.nwait.Load() == 0 && b.tryAcquire(n)
}

// tryAcquireAt is TryAcquire, or with first tryAcquire: ahead of any
// waiters.
func (b *Budget) tryAcquireAt(n int64, first bool) bool {
	if first {
		return b.tryAcquire(n)
	}
	return b.TryAcquire(n)
}

// Acquire takes n bytes of the budget, waiting until they fit or ctx ends.
// It returns an error wrapping ErrFrameTooLarge, at once, when n exceeds
// the whole limit, and ctx's error (wrapped) when ctx ends first; in both
// cases nothing was taken. n <= 0 takes nothing.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	return b.acquire(ctx, n, false)
}

// acquire is Acquire; first puts the reservation ahead of every waiter
// (the lane holder's pieces) instead of behind them.
func (b *Budget) acquire(ctx context.Context, n int64, first bool) error {
	if n <= 0 {
		return nil
	}
	if n > b.limit {
		b.refused.Add(1)
		return b.errOverBudget(n)
	}
	if b.tryAcquireAt(n, first) {
		return nil
	}
	b.mu.Lock()
	// nwait is raised before trying again, and release lowers used before
	// reading nwait: either this attempt sees the room a release makes, or
	// that release sees a waiter and grants it.
	b.nwait.Add(1)
	if (first || len(b.waiters) == 0) && b.tryAcquire(n) {
		b.nwait.Add(-1)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	if first {
		b.waiters = append([]*budgetWaiter{w}, b.waiters...)
	} else {
		b.waiters = append(b.waiters, w)
	}
	b.waits.Add(1)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	granted := true
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			b.nwait.Add(-1)
			granted = false
			break
		}
	}
	b.mu.Unlock()
	if granted {
		// Granted just as ctx ended: give it back (which also lets the
		// waiters behind it in).
		b.Release(n)
	} else {
		b.grant() // it may have been the head holding the others back
	}
	return fmt.Errorf("waiting for %d bytes of request budget: %w", n, ctx.Err())
}

// Release returns n bytes taken by Acquire or TryAcquire and wakes the
// waiters that now fit, in order.
func (b *Budget) Release(n int64) {
	if n <= 0 {
		return
	}
	if b.used.Add(-n) < 0 {
		panic("remoting: request budget released more than was taken")
	}
	if b.nwait.Load() > 0 {
		b.grant()
	}
}

// grant hands room to the waiters at the head of the queue while they fit.
func (b *Budget) grant() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if !b.tryAcquire(w.n) {
			return
		}
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.nwait.Add(-1)
		close(w.ready)
	}
}

// noteMaxFrame records that a server using b accepts frames of up to n
// bytes; the stream share is what the largest of them leaves.
func (b *Budget) noteMaxFrame(n int64) {
	for m := b.maxFrame.Load(); n > m && !b.maxFrame.CompareAndSwap(m, n); m = b.maxFrame.Load() {
	}
}

// takeStream counts n more bytes against the stream share if they fit in
// it; it reports whether they did. It reserves nothing of the budget
// itself.
func (b *Budget) takeStream(n int64) bool {
	share := b.limit - b.maxFrame.Load()
	for {
		s := b.streaming.Load()
		if s+n > share {
			return false
		}
		if b.streaming.CompareAndSwap(s, s+n) {
			return true
		}
	}
}

// releaseStream gives back n bytes of the stream share.
func (b *Budget) releaseStream(n int64) {
	if n > 0 && b.streaming.Add(-n) < 0 {
		panic("remoting: request budget stream share released more than was taken")
	}
}

// takeLane waits for the lane or ctx's end.
func (b *Budget) takeLane(ctx context.Context) error {
	select {
	case b.lane <- struct{}{}:
		return nil
	default:
	}
	b.waits.Add(1)
	select {
	case b.lane <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the request budget's lane for large frames: %w", ctx.Err())
	}
}

// releaseLane gives the lane back.
func (b *Budget) releaseLane() { <-b.lane }
