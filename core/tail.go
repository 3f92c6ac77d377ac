package core

import (
	"fmt"
	"time"
)

// The recovery tail: what crash recovery must re-read is the log above the
// durable checkpoint's flushed offset (validated record by record) and above
// its dispatched offset (dispatched again). This file keeps both within
// Options.RecoveryTail of the writer, whatever the flush strategy and the
// load, so that recovery costs that bound and not the store's size:
//
//   - Flush behind the writer: when a quarter of the bound is committed but
//     not flushed, the store flushes by itself (a strategy that flushes
//     more often never reaches this; one that flushes on a timer, such as
//     async, gets extra fdatasyncs only under a load that outruns its
//     interval). More durable than the strategy asked is never wrong.
//   - Checkpoint behind the flusher and the dispatcher: when a quarter of
//     the bound has been flushed or dispatched since the last checkpoint,
//     a checkpoint is written at once instead of at the next
//     CheckpointEvery tick.
//   - Write stalls: when, even so, the committed offset runs a whole bound
//     ahead of the checkpoint's flushed offset, or the confirmed
//     (dispatchable) offset a whole bound ahead of its dispatched offset —
//     the disk or the dispatcher cannot keep up — appends wait for the next
//     checkpoint (pebble's and RocksDB's write stall). A stall that lasts
//     Options.StallTimeout fails the append with ErrBusy; nothing is
//     written. Stalls are counted (Store.Stalls).
//
// The bound therefore holds at every moment: the log holds at most
// RecoveryTail, plus the batches of the appends in flight when it was
// reached (and the BLANK padding of a segment one of them rolled away
// from, less than its batch), above the durable checkpoint's flushed
// offset, and as much of confirmed records above its dispatched offset. Records not yet confirmed (a sync
// replication profile whose replica is away) are outside the dispatched
// bound: the dispatcher may not pass them, so they wait for the replica,
// not for the disk.

// StallStats counts write stalls since Open.
type StallStats struct {
	Count    int64         // appends that waited
	Duration time.Duration // total time they waited
	TimedOut int64         // appends that failed with ErrBusy
}

// Stalls reports the write stalls since Open.
func (s *Store) Stalls() StallStats {
	return StallStats{Count: s.stallCount.Load(), Duration: time.Duration(s.stallNanos.Load()), TimedOut: s.stallTimeouts.Load()}
}

// TailBehind reports how far the log runs ahead of the durable checkpoint:
// unflushed is committed minus the checkpoint's flushed offset (what a
// crash recovery validates), undispatched is the confirm offset minus the
// checkpoint's dispatched offset (what it dispatches again). Both are at
// most Options.RecoveryTail plus the appends in flight while the bound is
// on.
func (s *Store) TailBehind() (unflushed, undispatched int64) {
	c := s.committed.Load()
	return max(0, c-s.ckptFlushed.Load()), max(0, min(c, s.confirmOffset())-s.ckptDispatched.Load())
}

// RecoveryTailBound is Options.RecoveryTail in force (<= 0: no bound).
func (s *Store) RecoveryTailBound() int64 { return s.opts.RecoveryTail }

// tailQuarter is the progress that triggers a flush or a checkpoint behind
// the writer; 0 when the bound is off.
func (s *Store) tailQuarter() int64 {
	if s.opts.RecoveryTail <= 0 {
		return 0
	}
	return max(1, s.opts.RecoveryTail/4)
}

// kickTail wakes the tail keeper; it never blocks.
func (s *Store) kickTail() {
	select {
	case s.tailCh <- struct{}{}:
	default:
	}
}

// afterCommit is called after the committed offset grew: a quarter of the
// bound unflushed, or the tail full, wakes the keeper. Two atomic loads.
func (s *Store) afterCommit() {
	if q := s.tailQuarter(); q > 0 && s.committed.Load()-s.flushed.Load() >= q {
		s.kickTail()
	}
}

// afterProgress is called after the flushed or dispatched offset grew.
func (s *Store) afterProgress() {
	if q := s.tailQuarter(); q > 0 &&
		(s.flushed.Load()-s.ckptFlushed.Load() >= q || s.dispatched.Load()-s.ckptDispatched.Load() >= q) {
		s.kickTail()
	}
}

// tailFull reports whether appends must wait for a checkpoint. What Open
// recovered and left to re-dispatch (below openEnd) is not charged to the
// appends that follow: they stall only once they themselves run a bound
// ahead of the dispatcher's checkpoint, so a store that opens with a large
// re-dispatch (a rebuilt checkpoint, a long-undispatched tail) takes
// appends at once, and the next crash re-dispatches at most the bound
// more than this one did.
func (s *Store) tailFull() bool {
	b := s.opts.RecoveryTail
	if b <= 0 {
		return false
	}
	c := s.committed.Load()
	dbase := max(s.ckptDispatched.Load(), s.openEnd.Load())
	if c-s.ckptFlushed.Load() < b && c-dbase < b {
		return false // the fast path
	}
	return c-s.ckptFlushed.Load() >= b || min(c, s.confirmOffset())-dbase >= b
}

// awaitTailRoom is the write stall: it returns at once while the tail is
// below the bound, otherwise waits for checkpoints until it is, the store
// closes (ErrClosed) or StallTimeout passes (ErrBusy).
func (s *Store) awaitTailRoom() error {
	if !s.tailFull() {
		return nil
	}
	t0 := time.Now()
	s.stallCount.Add(1)
	defer func() { s.stallNanos.Add(int64(time.Since(t0))) }()
	timer := time.NewTimer(s.opts.StallTimeout)
	defer timer.Stop()
	for {
		ch := s.ckptN.wait()
		if !s.tailFull() {
			return nil
		}
		s.kickTail()
		select {
		case <-ch:
		case <-s.stop:
			return ErrClosed
		case <-timer.C:
			s.stallTimeouts.Add(1)
			f, d := s.TailBehind()
			why := ""
			if p := s.dispatchFail.Load(); p != nil {
				why = "; dispatch is failing: " + *p
			} else if p := s.ckptFail.Load(); p != nil {
				why = "; checkpoints cannot record dispatch progress: " + *p
			} else if s.readOnly.Load() {
				why = "; the store is read-only after an I/O error"
			}
			return fmt.Errorf("append waited %v for the recovery tail (%d bytes unflushed, %d undispatched above the checkpoint; bound %d)%s: %w",
				s.opts.StallTimeout, f, d, s.opts.RecoveryTail, why, ErrBusy)
		}
	}
}

// tailRetry is how long the tail keeper ignores kicks after a failed flush
// or checkpoint (an indexer that cannot sync fails every attempt; the
// periodic checkpoint still runs meanwhile).
const tailRetry = time.Second

// tailLoop flushes and checkpoints behind the writer when kicked.
func (s *Store) tailLoop() {
	var failedAt time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-s.tailCh:
		}
		if time.Since(failedAt) < tailRetry {
			continue
		}
		if err := s.keepTail(); err != nil {
			s.log.Error("flush or checkpoint behind the writer failed; retrying in a second", "err", err)
			failedAt = time.Now()
		}
	}
}

// keepTail flushes while a quarter of the bound is unflushed and writes a
// checkpoint while one would record a quarter of progress; each round
// makes progress or ends.
func (s *Store) keepTail() error {
	q := s.tailQuarter()
	for !s.closed.Load() {
		did := false
		if !s.readOnly.Load() && s.committed.Load()-s.flushed.Load() >= q {
			if _, err := s.Flush(); err != nil {
				return err
			}
			did = true
		}
		if s.flushed.Load()-s.ckptFlushed.Load() >= q || s.dispatched.Load()-s.ckptDispatched.Load() >= q {
			if err := s.Checkpoint(); err != nil {
				return err
			}
			did = true
		}
		if !did {
			return nil
		}
	}
	return nil
}
