package cq

import (
	"fmt"
	"math"
)

// Put stores e at queueOffset. It must only be called by the queue's single
// writer goroutine, never concurrently with TruncatePhys, SetMinPhysOffset
// or Close.
//
//   - If e ends at or below MaxPhysOffset() it is already indexed (recovery
//     re-dispatches the commitlog tail) and Put returns nil without writing
//     or checking queueOffset.
//   - e must have Offset >= 0, 0 < Size < math.MaxInt32, an End that fits
//     in an int64, and Offset at or beyond MaxPhysOffset(); otherwise the
//     error wraps ErrInvalidEntry.
//   - On a queue with no files, queueOffset may be anything >= 0: the
//     first file is the one containing queueOffset and the entries before
//     queueOffset in it are filled with blank units.
//   - Otherwise queueOffset must equal Max(); if not, the error wraps
//     ErrQueueOffsetMismatch and names both offsets.
//
// When the last file is full, Put creates, preallocates and maps the next
// one; an error doing so (for example vfs.ErrNoSpace) leaves the queue
// unchanged and the call may be retried. On success the entry is visible to
// readers (Max() includes it) but not durable until Flush.
func (q *Queue) Put(queueOffset int64, e Entry) error {
	if q.closed.Load() {
		return ErrClosed
	}
	if !e.valid() || e.IsBlank() {
		return fmt.Errorf("%w: put %s/%d at queue offset %d: offset %d size %d", ErrInvalidEntry, q.topic, q.id, queueOffset, e.Offset, e.Size)
	}
	maxPhys := q.maxPhys.Load()
	if e.End() <= maxPhys {
		return nil // already indexed
	}
	if e.Offset < maxPhys {
		return fmt.Errorf("%w: put %s/%d at queue offset %d: commitlog offset %d overlaps the last entry ending at %d", ErrInvalidEntry, q.topic, q.id, queueOffset, e.Offset, maxPhys)
	}
	fl := *q.files.Load()
	if len(fl) == 0 {
		return q.putFirst(queueOffset, e)
	}
	mx := q.max.Load()
	if queueOffset != mx {
		return fmt.Errorf("%w: put %s/%d: queue offset %d, expected %d", ErrQueueOffsetMismatch, q.topic, q.id, queueOffset, mx)
	}
	idx := (mx - fl[0].start) / q.epf
	if idx == int64(len(fl)) {
		f, err := q.createFile(mx)
		if err != nil {
			return fmt.Errorf("put %s/%d at queue offset %d: %w", q.topic, q.id, queueOffset, err)
		}
		nfl := make([]*qfile, len(fl)+1)
		copy(nfl, fl)
		nfl[len(fl)] = f
		q.files.Store(&nfl)
		fl = nfl
	}
	f := fl[idx]
	i := (mx - f.start) * EntrySize
	encodeEntry(f.b[i:i+EntrySize], e)
	q.maxPhys.Store(e.End())
	q.max.Store(mx + 1) // publish
	return nil
}

func (q *Queue) putFirst(queueOffset int64, e Entry) error {
	if queueOffset < 0 || queueOffset > math.MaxInt64/EntrySize-q.epf {
		return fmt.Errorf("%w: put %s/%d: queue offset %d out of range", ErrQueueOffsetMismatch, q.topic, q.id, queueOffset)
	}
	start := queueOffset - queueOffset%q.epf
	f, err := q.createFile(start)
	if err != nil {
		return fmt.Errorf("put %s/%d at queue offset %d: %w", q.topic, q.id, queueOffset, err)
	}
	if queueOffset > start {
		q.log.Info("cq: queue starts mid-stream, filling blanks", "first", queueOffset, "fileStart", start)
		var unit [EntrySize]byte
		encodeEntry(unit[:], blankEntry)
		for off := int64(0); off < (queueOffset-start)*EntrySize; off += EntrySize {
			copy(f.b[off:off+EntrySize], unit[:])
		}
	}
	i := (queueOffset - start) * EntrySize
	encodeEntry(f.b[i:i+EntrySize], e)
	fl := []*qfile{f}
	q.files.Store(&fl)
	q.flushed.Store(start)
	q.min.Store(queueOffset) // before max: a reader that sees max sees min
	q.maxPhys.Store(e.End())
	q.max.Store(queueOffset + 1)
	return nil
}
