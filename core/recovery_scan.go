package core

import (
	"errors"
	"fmt"

	"github.com/keelmq/keel/core/cq"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
)

// scan validates records from `from` and returns the end of the valid log
// and, per queue, one past the highest queue offset seen.
func (s *Store) scan(from, durable int64, checkCRC bool) (int64, map[queueKey]int64, error) {
	table := make(map[queueKey]int64)
	off := from
	var rc record.Checker
	var valid string // the last topic name dispatchable accepted
	for {
		seg := s.segmentFor(off)
		if seg == nil {
			return off, table, nil
		}
		var bad error
		var lastTs int64
		err := seg.view(off-seg.start, seg.start+s.opts.SegmentSize-off, func(b []byte) error {
			for len(b) > 0 {
				size, info, err := rc.Check(b, checkCRC)
				if err == nil && !info.Blank && info.PhysOffset != off {
					err = fmt.Errorf("%w: record claims physical offset %d", record.ErrCorrupt, info.PhysOffset)
				}
				if err != nil {
					bad = err
					return nil
				}
				if info.Blank {
					off = seg.start + s.opts.SegmentSize
					return nil
				}
				if err := dispatchable(info, info.Topic == valid); err != nil {
					bad = err
					return nil
				}
				valid = info.Topic
				if err := s.checkQueueSeq(table, info, off); err != nil {
					bad = err
					return nil
				}
				lastTs = info.StoreTimestamp
				b = b[size:]
				off += int64(size)
			}
			return nil
		})
		if err != nil {
			return 0, nil, fmt.Errorf("recovery scan at %d: %w", off, err)
		}
		if lastTs > 0 {
			s.lastTs.Store(lastTs)
			s.flushedTs.Store(lastTs)
		}
		if bad != nil {
			if off < durable {
				return 0, nil, &CorruptError{File: seg.path, Offset: off, Reason: bad}
			}
			switch {
			case errors.Is(bad, record.ErrZeroed):
				// Never-written space: the normal end of a log, not damage.
				s.log.Debug("log ends in never-written space", "file", seg.path, "offset", off)
			case s.recovery.Crashed:
				s.log.Warn("torn tail found after a crash; truncating", "file", seg.path, "offset", off, "reason", bad)
			}
			return off, table, nil
		}
		if off < seg.start+s.opts.SegmentSize {
			return off, table, nil
		}
	}
}

// checkQueueSeq checks that the record info at off continues its queue's
// sequence of queue offsets and records it in table (one past the highest
// queue offset seen, per queue). Header fields outside the body have no
// CRC: a queue offset that breaks its queue's sequence is damage. A queue
// not yet seen by the scan continues what its consume queue holds, if that
// ends at or below off.
func (s *Store) checkQueueSeq(table map[queueKey]int64, info record.Info, off int64) error {
	if !countsInQueue(info.SysFlag) {
		return nil
	}
	k := queueKey{info.Topic, info.QueueID}
	want, seen := table[k]
	if !seen {
		if q := s.cqs.Get(k.topic, k.qid); q != nil && q.Max() > 0 && q.MaxPhysOffset() <= off {
			want, seen = q.Max(), true
		}
	}
	if seen && info.QueueOffset != want {
		return fmt.Errorf("%w: %s/%d queue offset %d, expected %d", record.ErrCorrupt, k.topic, k.qid, info.QueueOffset, want)
	}
	table[k] = info.QueueOffset + 1
	return nil
}

// cutAfter removes every byte of the log at or after end: zeroes the rest of
// the segment holding end (when zero is true or stale bytes are found) and
// removes later segments.
func (s *Store) cutAfter(end int64, zero bool) error {
	return s.cut(end, zero, false)
}

// cut is cutAfter; syncZero also fdatasyncs the zeroed range. Recovery
// does not: the next Flush makes the zeroing durable before any
// checkpoint claims data beyond end, and until then a power cut finds the
// same invalid record at end again. Syncing here would write the whole
// dirty tail of the segment before the store could open.
func (s *Store) cut(end int64, zero, syncZero bool) error {
	segs := *s.segs.Load()
	keep := segs[:0:0]
	var removed []*segment
	for _, seg := range segs {
		if seg.start > end {
			removed = append(removed, seg)
		} else {
			keep = append(keep, seg)
		}
	}
	if seg := s.segmentFor(end); seg != nil {
		rel := end - seg.start
		if !zero {
			var hdr [4]byte
			_ = seg.readAt(hdr[:], end)
			zero = hdr != [4]byte{}
		}
		if zero {
			s.recovery.Truncated += s.opts.SegmentSize - rel
			if err := seg.f.ZeroRange(rel, s.opts.SegmentSize-rel); err != nil {
				return fmt.Errorf("zero torn tail of %s from %d: %w", seg.path, end, err)
			}
			if syncZero {
				if err := seg.f.Datasync(); err != nil {
					return fmt.Errorf("sync zeroed tail of %s: %w", seg.path, err)
				}
			}
		}
	}
	for _, seg := range removed {
		var hdr [4]byte
		if err := seg.readAt(hdr[:], seg.start); err == nil && hdr == [4]byte{} {
			// A segment preallocated ahead of the writer and never used.
			s.log.Debug("removing an unused preallocated segment", "file", seg.path)
		} else {
			s.log.Warn("removing segment past the end of the recovered log", "file", seg.path, "end", end)
		}
		if err := seg.remove(s.fs); err != nil {
			return err
		}
	}
	if len(removed) > 0 {
		if err := s.fs.SyncDir(s.cl); err != nil {
			return fmt.Errorf("sync commitlog dir: %w", err)
		}
	}
	s.segs.Store(&keep)
	return nil
}

// dispatchable checks what dispatch needs of a record beyond its CRC
// (header fields have none): a valid topic name (unless topicOK: the
// caller has just validated this same name) and queue id.
func dispatchable(info record.Info, topicOK bool) error {
	if !topicOK {
		if err := meta.ValidateTopicName(info.Topic); err != nil {
			return fmt.Errorf("%w: %w", record.ErrCorrupt, err)
		}
	}
	if info.QueueID < 0 || info.QueueID > cq.MaxQueueID {
		return fmt.Errorf("%w: queue id %d out of range", record.ErrCorrupt, info.QueueID)
	}
	// Every earlier record of the queue precedes this one in the (shared)
	// log and is at least MinRecordSize long.
	if info.QueueOffset < 0 || info.QueueOffset > info.PhysOffset/record.MinRecordSize {
		return fmt.Errorf("%w: queue offset %d impossible at physical offset %d", record.ErrCorrupt, info.QueueOffset, info.PhysOffset)
	}
	return nil
}
