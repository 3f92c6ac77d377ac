package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelmq/keel/internal/offwait"
)

// WaitFlushed blocks until the flushed offset reaches off or ctx ends. It
// does not flush by itself: a flush strategy must be running.
func (s *Store) WaitFlushed(ctx context.Context, off int64) error {
	reached := func() bool { return s.flushed.Load() >= off }
	switch err := s.flushWait.Wait(ctx, off, reached, s.stop); {
	case errors.Is(err, offwait.ErrStopped):
		if reached() {
			return nil
		}
		return ErrClosed
	case err != nil:
		return err
	case !reached() && s.closed.Load():
		return ErrClosed
	case !reached():
		return fmt.Errorf("wait for flush to %d: the log was truncated below it: %w", off, ErrOffset)
	}
	return nil
}

// OnFlushed calls fn(true) once the flushed offset reaches off, or
// fn(false) if timeout passes first, the log is truncated below off, or
// the store closes without flushing it. fn runs exactly once: at once on
// the caller's goroutine when off is already flushed, otherwise on the
// flushing (or timer) goroutine, so it must be quick and must not block.
// It is WaitFlushed without a goroutine parked per waiter; the host sends
// sync-flush acknowledgements with it.
func (s *Store) OnFlushed(off int64, timeout time.Duration, fn func(ok bool)) {
	s.flushWait.Notify(off, timeout, func() bool { return s.flushed.Load() >= off }, fn)
}

// WaitCommitted blocks until the committed offset exceeds after, and
// returns it. Flush strategies and replicators use it to learn of new data.
//
// With Options.CommitOnWait it waits for appended bytes instead and commits
// them (Commit) before returning, so the caller's wake-up moves everything
// buffered into the segment file with one write.
func (s *Store) WaitCommitted(ctx context.Context, after int64) (int64, error) {
	if s.wb != nil && s.opts.CommitOnWait {
		for {
			if err := waitFor(ctx, &s.wroteN, s.stop, func() bool { return s.wb.wrote.Load() > after || s.committed.Load() > after }); err != nil {
				return 0, err
			}
			c, err := s.Commit()
			if err != nil {
				return c, err
			}
			if c > after {
				return c, nil
			}
		}
	}
	var c int64
	err := waitFor(ctx, &s.committedN, s.stop, func() bool { c = s.committed.Load(); return c > after })
	return c, err
}

// WaitDispatched blocks until the dispatched offset exceeds after, and
// returns it. Long-polling pulls use it.
func (s *Store) WaitDispatched(ctx context.Context, after int64) (int64, error) {
	var d int64
	err := waitFor(ctx, &s.dispatchedN, s.stop, func() bool { d = s.dispatched.Load(); return d > after })
	return d, err
}

func waitFor(ctx context.Context, n *notifier, stop chan struct{}, cond func() bool) error {
	for {
		ch := n.wait()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			if cond() {
				return nil
			}
			return ErrClosed
		}
	}
}

// DispatchSignal returns a channel closed at the next dispatch progress
// (or at Close). Long polling uses it to wake on new data without a
// goroutine per waiter; a wake-up may be spurious.
func (s *Store) DispatchSignal() <-chan struct{} {
	if s.closed.Load() {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.dispatchedN.wait()
}

// Closed reports whether Close has begun: the store takes no more writes
// and its signals (DispatchSignal) are closed for good.
func (s *Store) Closed() bool { return s.closed.Load() }
