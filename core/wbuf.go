package core

import (
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

// put copies b, then zeroN zero bytes, into the ring at stream offset pos.
// Called under appendMu with pos == wrote; commits inline first when the
// ring lacks room.
func (s *Store) wbPutLocked(pos int64, b []byte, zeroN int) {
	wb := s.wb
	n := int64(len(b) + zeroN)
	if pos+n-s.committed.Load() > int64(len(wb.ring)) {
		wb.mu.Lock()
		s.commitWBLocked()
		wb.mu.Unlock()
	}
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

// commitWBLocked moves [committed, wrote) from the ring into the segments;
// wb.mu is held.
func (s *Store) commitWBLocked() int64 {
	wb := s.wb
	from, to := s.committed.Load(), wb.wrote.Load()
	if from >= to {
		return from
	}
	size := int64(len(wb.ring))
	for pos := from; pos < to; {
		seg := s.segmentFor(pos)
		end := min(to, seg.start+s.opts.SegmentSize)
		for p := pos; p < end; {
			i := p % size
			c := min(end-p, size-i)
			copy(seg.data[p-seg.start:], wb.ring[i:i+c])
			p += c
		}
		pos = end
	}
	s.committed.Store(to)
	s.committedN.notify()
	return to
}

// commitAllLocked commits everything buffered; appendMu is held.
func (s *Store) commitAllLocked() {
	if s.wb == nil {
		return
	}
	s.wb.mu.Lock()
	s.commitWBLocked()
	s.wb.mu.Unlock()
}
