package core

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// writeBuffer is RocketMQ's transient-store-pool idea: appends copy into
// an in-memory ring instead of the mapped segment, and Commit moves the
// bytes into the segments in large batches. Readers, dispatch and
// replication see only committed bytes. The ring holds the stream
// [committed, wrote) at position%len(ring).
//
// Locking: appendMu (writers) may take mu (an inline commit when the ring
// is full); Commit takes mu alone.
type writeBuffer struct {
	mu    sync.Mutex
	ring  []byte
	wrote atomic.Int64 // stream offset up to which the ring holds data
}

// wbRoomLocked makes room in the ring for n more bytes, committing what
// it holds when it lacks room. Called under appendMu before any state of an
// append changes, so a failed commit leaves the append undone.
func (s *Store) wbRoomLocked(n int64) error {
	wb := s.wb
	if n > int64(len(wb.ring)) {
		return fmt.Errorf("append of %d bytes exceeds the %d-byte write buffer: %w", n, len(wb.ring), ErrMessage)
	}
	if wb.wrote.Load()+n-s.committed.Load() <= int64(len(wb.ring)) {
		return nil
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	_, err := s.commitWBLocked()
	return err
}

// wbPutLocked copies b, then zeroN zero bytes, into the ring at stream
// offset pos. Called under appendMu with pos == wrote after wbRoomLocked
// made room for them.
func (s *Store) wbPutLocked(pos int64, b []byte, zeroN int) {
	wb := s.wb
	ringCopy(wb.ring, pos, b)
	if zeroN > 0 {
		ringZero(wb.ring, pos+int64(len(b)), zeroN)
	}
}

func ringCopy(ring []byte, pos int64, b []byte) {
	for len(b) > 0 {
		i := int(pos % int64(len(ring)))
		c := copy(ring[i:], b)
		b = b[c:]
		pos += int64(c)
	}
}

func ringZero(ring []byte, pos int64, n int) {
	for n > 0 {
		i := int(pos % int64(len(ring)))
		c := min(n, len(ring)-i)
		clear(ring[i : i+c])
		n -= c
		pos += int64(c)
	}
}

// commitWBLocked writes [committed, wrote) from the ring into the segment
// files with pwrite(2) (never through the mapping: see
// Options.CommitOnWait) and advances committed; wb.mu is held. A failed
// write makes the store read-only and leaves committed where it was.
func (s *Store) commitWBLocked() (int64, error) {
	wb := s.wb
	from, to := s.committed.Load(), wb.wrote.Load()
	if from >= to {
		return from, nil
	}
	if s.readOnly.Load() {
		return from, fmt.Errorf("commit %d..%d: %w", from, to, ErrReadOnly)
	}
	size := int64(len(wb.ring))
	for pos := from; pos < to; {
		seg := s.segmentFor(pos)
		if seg == nil {
			return from, fmt.Errorf("commit %d..%d: no segment holds %d", from, to, pos)
		}
		end := min(to, seg.start+s.opts.SegmentSize)
		for p := pos; p < end; {
			i := p % size
			c := min(end-p, size-i)
			if err := seg.writeAt(wb.ring[i:i+c], p-seg.start); err != nil {
				s.readOnly.Store(true)
				s.log.Error("commit from the write buffer failed; store is now read-only", "err", err)
				return from, fmt.Errorf("commit %d..%d: %w: %w", from, to, ErrReadOnly, err)
			}
			p += c
		}
		pos = end
	}
	s.setCommitted(to)
	if invariants {
		s.assertAscending("commit", namedPos{"committed", to}, namedPos{"wrote", wb.wrote.Load()})
	}
	s.committedN.notify()
	s.afterCommit()
	return to, nil
}

// commitAllLocked commits everything buffered; appendMu is held.
func (s *Store) commitAllLocked() error {
	if s.wb == nil {
		return nil
	}
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	_, err := s.commitWBLocked()
	return err
}

// Commit moves write-buffered bytes (Options.WriteBuffer) into the segment
// files, makes them visible to readers, dispatch and replication, and
// returns the committed offset. Without a write buffer every append is
// committed when it returns and Commit only reports the offset.
func (s *Store) Commit() (int64, error) {
	if s.wb == nil {
		return s.committed.Load(), nil
	}
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	return s.commitWBLocked()
}
