package core

import (
	"fmt"

	"github.com/keelmq/keel/core/record"
)

// writebackStep is how much AppendRaw writes before it asks the kernel to
// start writing it back.
const writebackStep = 4 << 20

// writebackReq is a writeback hint for [rel, rel+n) of seg.
type writebackReq struct {
	seg    *segment
	rel, n int64
}

// AppendRaw appends replicated log bytes at physical offset off, which must
// equal the committed offset (or, on an empty store, any offset: the log
// then starts there, as for a slave copying from a master's minimum). data
// must hold whole records as ReadLog returns them: each record's
// PHYSICALOFFSET must equal its position, and a BLANK must end exactly at
// its segment's end. Records are CRC-checked, and each must be one the
// dispatcher can take, the check recovery applies to the log (dispatchable:
// a topic keeping meta.ValidateTopicName, a queue id and queue offset in
// range; otherwise the error wraps record.ErrCorrupt and, for the topic,
// meta.ErrInvalid). A master's Append refuses such topics, so bytes holding
// one are damaged or come from a master that does not keep the rule.
// Nothing is written unless all of data is valid. Queue offsets are taken
// from the records, so a slave's consume queues are index-identical to its
// master's.
func (s *Store) AppendRaw(off int64, data []byte) error {
	if err := s.Writable(); err != nil {
		return err
	}
	if err := s.awaitTailRoom(); err != nil {
		return err
	}
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.commitAllLocked(); err != nil {
		return err
	}
	empty := len(*s.segs.Load()) == 0
	if !empty && off != s.wrotePos {
		return fmt.Errorf("append replicated bytes at %d: local log ends at %d: %w", off, s.wrotePos, ErrOffset)
	}
	if empty {
		s.wrotePos = off
		s.minOffset.Store(off)
		s.setCommitted(off)
		s.flushed.Store(off)
		s.dispatched.Store(off)
	}
	// Validate first: nothing is written unless everything is valid.
	recs, err := s.checkRaw(off, data)
	if err != nil {
		return err
	}
	if err := s.writeRawLocked(data); err != nil {
		return err
	}
	for _, r := range recs {
		if r.counts && r.qo+1 > s.queueOffsets[r.qk] {
			s.queueOffsets[r.qk] = r.qo + 1
		}
		s.lastTs.Store(r.ts)
	}
	s.setCommitted(s.wrotePos)
	if s.wb != nil {
		s.wb.wrote.Store(s.wrotePos)
	}
	if invariants {
		s.assertOrder("append raw")
	}
	s.committedN.notify()
	s.wroteN.notify()
	s.afterCommit()
	return nil
}

// rawRecord is what AppendRaw keeps of each replicated record it checked.
type rawRecord struct {
	qk     queueKey
	qo     int64 // its queue offset
	ts     int64 // its store timestamp
	counts bool  // it takes a queue offset (countsInQueue)
}

// checkRaw validates replicated bytes data meant for offset off (see
// AppendRaw) and returns their records, BLANKs excluded.
func (s *Store) checkRaw(off int64, data []byte) ([]rawRecord, error) {
	segSize := s.opts.SegmentSize
	recs := make([]rawRecord, 0, 16)
	pos := off
	var rc record.Checker
	var valid string
	for b := data; len(b) > 0; {
		size, info, err := rc.Check(b, true)
		if err != nil {
			return nil, fmt.Errorf("append replicated bytes: record at %d: %w", pos, err)
		}
		if info.Blank {
			if (pos+int64(size))%segSize != 0 || size != len(b) {
				return nil, fmt.Errorf("append replicated bytes: BLANK at %d of %d bytes does not end its segment and the data: %w", pos, size, ErrOffset)
			}
		} else {
			if info.PhysOffset != pos {
				return nil, fmt.Errorf("append replicated bytes: record at %d claims offset %d: %w", pos, info.PhysOffset, ErrOffset)
			}
			if err := dispatchable(info, info.Topic == valid); err != nil {
				return nil, fmt.Errorf("append replicated bytes: record at %d: %w", pos, err)
			}
			valid = info.Topic
			if pos/segSize != (pos+int64(size)-1)/segSize {
				return nil, fmt.Errorf("append replicated bytes: record at %d crosses a segment end: %w", pos, ErrOffset)
			}
			recs = append(recs, rawRecord{queueKey{info.Topic, info.QueueID}, info.QueueOffset, info.StoreTimestamp, countsInQueue(info.SysFlag)})
		}
		b = b[size:]
		pos += int64(size)
	}
	return recs, nil
}

// writeRawLocked writes checked replicated bytes at the write position,
// rolling segments as it goes, and advances the write position (not the
// committed offset). A write error makes the store read-only. appendMu is
// held.
func (s *Store) writeRawLocked(data []byte) error {
	segSize := s.opts.SegmentSize
	for b := data; len(b) > 0; {
		if s.active == nil || s.wrotePos >= s.active.start+segSize {
			if err := s.ensureRoomLocked(1); err != nil {
				return err
			}
		}
		rel := s.wrotePos - s.active.start
		n := min(int64(len(b)), segSize-rel)
		// pwrite, not a store into the mapping: pages written through
		// a mapping are write-protected again by every writeback, and a
		// catching-up replica writes while the last chunks are written
		// back (see below).
		if err := s.active.writeAt(b[:n], rel); err != nil {
			s.readOnly.Store(true)
			s.log.Error("append of replicated bytes failed; store is now read-only", "err", err)
			return fmt.Errorf("append replicated bytes at %d: %w: %w", s.wrotePos, ErrReadOnly, err)
		}
		s.wrotePos += n
		b = b[n:]
		s.hintWritebackLocked()
	}
	return nil
}

// hintWritebackLocked starts writing back what a replica copied, in
// writebackStep steps and at each segment's end, so the device works while
// the copy goes on and the next flush has little left to do. The hint goes
// to the warmer's goroutine, or runs here when the warmer is behind.
// appendMu is held.
func (s *Store) hintWritebackLocked() {
	if s.wrotePos-s.writebackFrom < writebackStep && s.wrotePos != s.active.start+s.opts.SegmentSize {
		return
	}
	from := max(s.writebackFrom, s.active.start)
	r := writebackReq{s.active, from - s.active.start, s.wrotePos - from}
	select {
	case s.writebackCh <- r:
	default:
		r.seg.startWriteback(r.rel, r.n) // the warmer is behind: here
	}
	s.writebackFrom = s.wrotePos
}

// Truncate cuts the log back to off, a record boundary in [min, committed]:
// commitlog bytes, consume queue entries, queue offsets, the epoch history
// and the checkpoint all follow. Replication uses it when a slave's tail
// diverges from its master. Appends and dispatch are paused meanwhile.
func (s *Store) Truncate(off int64) error {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	if err := s.commitAllLocked(); err != nil {
		return fmt.Errorf("truncate to %d: %w", off, err)
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if off == s.wrotePos {
		return nil
	}
	if off < s.minOffset.Load() || off > s.wrotePos {
		return fmt.Errorf("truncate to %d (log is [%d,%d)): %w", off, s.minOffset.Load(), s.wrotePos, ErrOffset)
	}
	if err := s.checkBoundaryLocked(off); err != nil {
		return fmt.Errorf("truncate to %d: not a record boundary: %w: %w", off, ErrOffset, err)
	}
	if err := s.pre.discardRemove(); err != nil {
		return fmt.Errorf("truncate to %d: drop preallocated segment: %w", off, err)
	}
	if err := s.cut(off, true, true); err != nil {
		return err
	}
	if err := s.cqs.TruncatePhys(off); err != nil {
		return fmt.Errorf("truncate consume queues to %d: %w", off, err)
	}
	if err := s.epochs.TruncateSuffix(off); err != nil {
		return fmt.Errorf("truncate epochs to %d: %w", off, err)
	}
	disp := min(s.dispatched.Load(), off)
	// Rebuild queue offsets: the queues, then records not yet dispatched.
	_, table, err := s.scan(disp, off, false)
	if err != nil {
		return fmt.Errorf("rescan after truncate: %w", err)
	}
	s.restoreQueueOffsets(table)
	s.wrotePos = off
	if s.wb != nil {
		// Under the write buffer's lock: a Commit running now must not see
		// the lowered committed offset with the old written one and
		// commit the cut bytes again.
		s.wb.mu.Lock()
		s.wb.wrote.Store(off)
		s.setCommitted(off)
		s.wb.mu.Unlock()
	} else {
		s.setCommitted(off)
	}
	if s.flushed.Load() > off {
		s.flushed.Store(off)
	}
	s.flushWait.ReleaseAll() // waiters beyond off learn their record is gone
	s.truncGen.Add(1)
	s.dispatched.Store(disp)
	if invariants {
		s.assertOrder("truncate")
	}
	if seg := s.segmentFor(off); seg != nil {
		s.active = seg
	} else {
		segs := *s.segs.Load()
		if len(segs) > 0 {
			s.active = segs[len(segs)-1]
		}
	}
	if err := s.checkpointTruncated(off, disp); err != nil {
		return err
	}
	if s.openEnd.Load() > off {
		s.openEnd.Store(off)
	}
	s.log.Warn("log truncated", "offset", off)
	return nil
}

// checkBoundaryLocked reports why off, in [min, wrote], is not a record
// boundary, or nil. A segment's start always is. appendMu is held.
func (s *Store) checkBoundaryLocked(off int64) error {
	seg := s.segmentFor(off)
	if seg == nil || off%s.opts.SegmentSize == 0 {
		return nil
	}
	var bad error
	seg.view(off-seg.start, min(s.wrotePos, seg.start+s.opts.SegmentSize)-off, func(b []byte) error {
		_, info, err := record.Check(b, false)
		if err == nil && !info.Blank && info.PhysOffset != off {
			err = fmt.Errorf("record there claims offset %d", info.PhysOffset)
		}
		bad = err
		return nil
	})
	return bad
}

// checkpointTruncated lowers the durable checkpoint's flushed and
// dispatched offsets to a log truncated at off and dispatched to disp.
func (s *Store) checkpointTruncated(off, disp int64) error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	c := s.ckpt.last
	c.Flushed, c.Dispatched = min(c.Flushed, off), min(c.Dispatched, disp)
	if err := s.ckpt.write(c); err != nil {
		return fmt.Errorf("checkpoint after truncate: %w", err)
	}
	s.recorded(c)
	return nil
}
