package core

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Position assertions, run only when built with -tags invariants (see
// invariants.go). Every change of a position asserts what must hold at the
// point of that change, and only that, so that no interleaving of
// goroutines can make an assertion fire falsely:
//
//   - With appendMu held (appends, AppendRaw, Truncate, retention, the
//     dispatcher's rewind, Open) assertOrder checks the whole order
//     Min <= Dispatched <= Committed <= Wrote, Confirm <= Committed and
//     Flushed <= Committed. Dispatched <= Confirm is the dispatcher's (it
//     dispatches only up to the confirm offset it read), not the store's:
//     a confirm source may start lower than what was dispatched before a
//     restart (the replicas' acknowledged offset is 0 until they report). Under appendMu Min and Wrote cannot move and
//     Committed, Flushed and Dispatched can only be lowered by the holder;
//     the others only grow, each to a value the position above it had
//     before, so loading the lower position of each pair first is safe.
//   - The flusher (flushMu held) asserts Flushed <= Committed; Committed is
//     lowered only under flushMu.
//   - The committer (write buffer lock held) asserts Committed <= Wrote;
//     Wrote is lowered only under that lock.
//   - The dispatcher (dispatchMu held) asserts
//     Min <= Dispatched <= Confirm and Dispatched <= Committed; only its
//     holder moves Dispatched, and retention moves Min only to an offset
//     already dispatched (Store.deletable, checked under appendMu).
//
// The recovery tail bound (tail.go) is not asserted: it is a bound on the
// log plus the batches in flight when it was reached, which no single
// goroutine can see.

// namedPos is one position in an asserted chain.
type namedPos struct {
	name string
	off  int64
}

// invariantsHook, when set (by tests), sees and may change every chain
// before it is checked: the way to violate a bound on purpose.
var invariantsHook atomic.Pointer[func(where string, chain []namedPos)]

// assertOrder checks the whole order of the positions. appendMu is held,
// or nothing else runs (Open).
func (s *Store) assertOrder(where string) {
	// Load order: see the file comment. Wrote is the writer's own
	// position, stable under appendMu.
	mn := s.minOffset.Load()
	fl := s.flushed.Load()
	d := s.dispatched.Load()
	cf := s.confirmOffset()
	c := s.committed.Load()
	s.assertAscending(where, namedPos{"min", mn}, namedPos{"dispatched", d}, namedPos{"committed", c}, namedPos{"wrote", s.wrotePos})
	s.assertAscending(where, namedPos{"confirm", cf}, namedPos{"committed", c})
	s.assertAscending(where, namedPos{"flushed", fl}, namedPos{"committed", c})
}

// assertAscending panics unless the offsets of chain do not decrease,
// naming the chain and a snapshot of every position.
func (s *Store) assertAscending(where string, chain ...namedPos) {
	if h := invariantsHook.Load(); h != nil {
		(*h)(where, chain)
	}
	for i := 1; i < len(chain); i++ {
		if chain[i-1].off > chain[i].off {
			var b strings.Builder
			for j, p := range chain {
				if j > 0 {
					b.WriteString(" <= ")
				}
				fmt.Fprintf(&b, "%s %d", p.name, p.off)
			}
			p := s.Positions()
			panic(fmt.Sprintf("keel invariants: %s: want %s: %s > %s; positions now: min %d dispatched %d confirm %d flushed %d committed %d wrote %d",
				where, b.String(), chain[i-1].name, chain[i].name, p.Min, p.Dispatched, p.Confirm, p.Flushed, p.Committed, p.Wrote))
		}
	}
}
