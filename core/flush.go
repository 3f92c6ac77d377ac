package core

import (
	"errors"
	"fmt"
	"time"
)

// Flush makes everything committed so far durable (fdatasync of the
// segments written since the last flush) and returns the flushed offset.
// Concurrent callers coalesce on one lock; a caller that arrives while a
// flush runs waits and then flushes what was committed meanwhile (group
// commit). An fsync error makes the store read-only (ErrReadOnly) until it
// is reopened: after a failed fsync the kernel may have dropped the dirty
// pages, so retrying cannot prove durability.
func (s *Store) Flush() (int64, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.readOnly.Load() {
		return s.flushed.Load(), ErrReadOnly
	}
	target := s.committed.Load()
	from := s.flushed.Load()
	if target <= from {
		return from, nil
	}
	ts := s.lastTs.Load()
	t0 := time.Now()
	for seg := s.segmentFor(from); seg != nil && seg.start < target; seg = s.segmentFor(seg.start + s.opts.SegmentSize) {
		if err := seg.sync(); err != nil {
			s.readOnly.Store(true)
			s.log.Error("flush failed; store is now read-only", "err", err)
			return from, fmt.Errorf("flush to %d: %w: %w", target, ErrReadOnly, err)
		}
	}
	s.flushed.Store(target)
	if invariants {
		s.assertAscending("flush", namedPos{"flushed", target}, namedPos{"committed", s.committed.Load()})
	}
	s.flushedTs.Store(ts)
	s.flushWait.Release(target)
	s.afterProgress()
	if s.opts.OnFlush != nil {
		s.opts.OnFlush(time.Since(t0), target-from)
	}
	if s.opts.VisibleAfterFlush {
		s.confirmN.notify()
	}
	return target, nil
}

func (s *Store) flushLoop() {
	t := time.NewTicker(s.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.Flush(); err != nil && !errors.Is(err, ErrReadOnly) {
				s.log.Error("periodic flush", "err", err)
			}
		}
	}
}
