package core

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/keelmq/keel/core/cq"
	"github.com/keelmq/keel/core/epoch"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
)

// recover loads segments, metadata and queues and brings them to a
// consistent state. Rules:
//
//   - Without an abort marker (clean shutdown) validation starts at the
//     checkpoint's dispatched offset, which a clean Close leaves at the end
//     of the log: only the tail is read, without CRC checks.
//   - With an abort marker (crash) validation starts at the checkpoint's
//     VerifyFrom (a record boundary about Options.VerifyWindow below the
//     flushed offset) or its dispatched offset, whichever is lower, checking
//     length, magic, position, queue-offset sequence and (unless disabled)
//     CRC. The cost is the window plus the unflushed tail, not the store's
//     size. A bad record below
//     the checkpoint's flushed offset is corruption of durable data: Open
//     fails with a *CorruptError and nothing is cut. A bad record at or
//     above it is a torn tail: the log ends there, the rest of that segment
//     is zeroed and later segments are removed.
//   - Consume queues are truncated to the recovered end (after a crash, to
//     the re-dispatch point, since unflushed entries may be torn); records between
//     the checkpoint's dispatched offset and the end are dispatched again
//     (idempotently) by the dispatcher.
//   - The flushed offset restarts at the checkpoint's: the recovered tail
//     is made durable by the flush strategy once the store runs, not
//     before it opens, so opening costs a scan of the tail, not a write of
//     it.
func (s *Store) recover() error {
	var err error
	t := time.Now()
	phase := func(name string) {
		now := time.Now()
		s.recovery.Phases = append(s.recovery.Phases, RecoveryPhase{Name: name, Took: now.Sub(t)})
		t = now
	}
	defer phase("finish")
	if s.meta, err = meta.Open(s.fs, filepath.Join(s.dir, ConfigDir)); err != nil {
		return fmt.Errorf("open metadata: %w", err)
	}
	if s.epochs, err = epoch.Open(s.fs, filepath.Join(s.dir, EpochFile)); err != nil {
		return fmt.Errorf("open epoch history: %w", err)
	}
	ckptPath := filepath.Join(s.dir, CheckpointFile)
	ck, haveCk, err := ReadCheckpoint(s.fs, ckptPath)
	if err != nil {
		return err
	}
	s.recovery.HadCheckpoint = haveCk
	_, aerr := s.fs.Stat(filepath.Join(s.dir, AbortFile))
	crashed := aerr == nil
	if aerr != nil && !errors.Is(aerr, fs.ErrNotExist) {
		return fmt.Errorf("stat abort marker: %w", aerr)
	}
	s.recovery.Crashed = crashed

	starts, err := listSegments(s.fs, s.cl)
	if err != nil {
		return err
	}
	var segs []*segment
	for i, st := range starts {
		if i > 0 && st != starts[i-1]+s.opts.SegmentSize {
			return fmt.Errorf("commitlog %s: segment %s does not follow %s (hole in the log)", s.cl, segmentName(st), segmentName(starts[i-1]))
		}
		path := filepath.Join(s.cl, segmentName(st))
		seg, err := openSegment(s.fs, path, st, s.opts.SegmentSize)
		if err != nil {
			if i == len(starts)-1 {
				if fi, serr := s.fs.Stat(path); serr == nil && fi.Size() == 0 {
					s.log.Warn("removing empty last segment", "file", path)
					if err := s.fs.Remove(path); err != nil {
						return fmt.Errorf("remove empty segment: %w", err)
					}
					break
				}
			}
			for _, sg := range segs {
				sg.close()
			}
			return err
		}
		segs = append(segs, seg)
	}
	s.segs.Store(&segs)
	phase("segments")

	s.cqs, err = cq.OpenSet(cq.Options{FS: s.fs, EntriesPerFile: s.opts.CQEntriesPerFile, Logger: s.opts.Logger},
		filepath.Join(s.dir, ConsumeQueueDir))
	if err != nil {
		return fmt.Errorf("open consume queues: %w", err)
	}

	if len(segs) == 0 {
		// An empty commitlog: nothing derived can be trusted.
		if err := s.cqs.RemoveAll(); err != nil {
			return fmt.Errorf("clear consume queues of an empty log: %w", err)
		}
		base := int64(0)
		if haveCk && ck.Min > 0 {
			base = ck.Min
		}
		s.setPositions(base, base, base)
		s.recovery.End = base
		return s.finishOpen(ckptPath, ck, haveCk)
	}

	minOff := segs[0].start
	if haveCk && ck.Min > minOff && ck.Min < segs[0].start+s.opts.SegmentSize {
		minOff = ck.Min // a slave whose log starts mid-segment
	}
	durable := minOff
	dispatchFrom := minOff
	if haveCk {
		durable = max(minOff, ck.Flushed)
		dispatchFrom = max(minOff, min(ck.Dispatched, ck.Flushed))
	}
	scanFrom := dispatchFrom
	checkCRC := false
	if crashed || !haveCk {
		checkCRC = !s.opts.DisableCRCOnRecover
		if haveCk {
			// Re-check a window below the checkpoint too: damage to
			// recently flushed data is refused, not served.
			scanFrom = max(minOff, min(scanFrom, ck.VerifyFrom))
		} else {
			scanFrom = minOff
		}
	}
	s.recovery.ScanFrom = scanFrom
	phase("queues")

	end, table, err := s.scan(scanFrom, durable, checkCRC)
	if err != nil {
		return err
	}
	s.recovery.End = end
	phase("scan")
	s.recovery.Redispatch = max(0, end-dispatchFrom)
	if dispatchFrom > end {
		dispatchFrom = end
	}

	// Cut whatever follows the end.
	if err := s.cutAfter(end, crashed || !haveCk); err != nil {
		return err
	}
	phase("cut")
	// Queue entries past the re-dispatch point may be torn (written after
	// the last queue flush) in ways a scan cannot see, such as a half
	// written tags code: cut them all and let dispatch rewrite them. After a
	// clean shutdown everything below the end was flushed whole.
	cqCut := end
	if crashed || !haveCk {
		cqCut = dispatchFrom
	}
	if err := s.cqs.SetMinPhysOffset(minOff); err != nil {
		return fmt.Errorf("correct consume queue minimums to %d: %w", minOff, err)
	}
	if err := s.cqs.TruncatePhys(cqCut); err != nil {
		return fmt.Errorf("truncate consume queues to %d: %w", cqCut, err)
	}
	phase("truncate-queues")
	if err := s.epochs.TruncateSuffix(end); err != nil {
		return fmt.Errorf("truncate epoch history to %d: %w", end, err)
	}
	// Queue offsets: what the queues hold, or what the scanned records say.
	s.cqs.Each(func(q *cq.Queue) bool {
		s.queueOffsets[queueKey{q.Topic(), q.QueueID()}] = q.Max()
		return true
	})
	for k, v := range table {
		if v > s.queueOffsets[k] {
			s.queueOffsets[k] = v
		}
	}
	// Only the checkpoint's flushed offset is known durable: after a
	// process crash the tail may still be only in the page cache. The flush
	// strategy makes it durable as usual once the store runs (a sync-flush
	// store's consumers see it only then), so opening does not wait for it.
	s.setPositions(minOff, end, dispatchFrom)
	s.openEnd.Store(end)
	s.flushed.Store(max(minOff, min(durable, end)))
	if last := s.segmentFor(end); last != nil {
		s.active = last
	} else {
		// The log ends exactly at a segment boundary; the next append rolls.
		segs := *s.segs.Load()
		s.active = segs[len(segs)-1]
	}
	return s.finishOpen(ckptPath, ck, haveCk)
}

func (s *Store) setPositions(minOff, end, dispatched int64) {
	s.minOffset.Store(minOff)
	s.wrotePos = end
	s.committed.Store(end)
	if s.wb != nil {
		s.wb.wrote.Store(end)
	}
	s.flushed.Store(end)
	s.dispatched.Store(dispatched)
}

// finishOpen writes the abort marker and a first checkpoint.
func (s *Store) finishOpen(ckptPath string, ck Checkpoint, haveCk bool) error {
	var err error
	if s.ckpt, err = openCheckpointFile(s.fs, ckptPath, ck, haveCk); err != nil {
		return err
	}
	abort, err := s.fs.Create(filepath.Join(s.dir, AbortFile))
	if err != nil {
		return fmt.Errorf("create abort marker: %w", err)
	}
	if err := abort.Sync(); err != nil {
		abort.Close()
		return fmt.Errorf("sync abort marker: %w", err)
	}
	abort.Close()
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("sync store dir: %w", err)
	}
	c := Checkpoint{
		Flushed:    s.flushed.Load(),
		Dispatched: s.dispatched.Load(),
		Min:        s.minOffset.Load(),
		Confirm:    ck.Confirm,
		PhysTs:     ck.PhysTs,
		LogicsTs:   ck.LogicsTs,
	}
	if haveCk && ck.VerifyFrom >= c.Min && ck.VerifyFrom <= c.Flushed {
		s.flushHist = []int64{ck.VerifyFrom}
	}
	c.VerifyFrom = s.verifyFromLocked(c.Flushed, c.Min)
	if err := s.ckpt.write(c); err != nil {
		return fmt.Errorf("write checkpoint after recovery: %w", err)
	}
	s.recorded(c)
	return nil
}

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
				if countsInQueue(info.SysFlag) {
					// Header fields outside the body have no CRC; a queue
					// offset that breaks its queue's sequence is damage.
					k := queueKey{info.Topic, info.QueueID}
					want, seen := table[k]
					if !seen {
						if q := s.cqs.Get(k.topic, k.qid); q != nil && q.Max() > 0 && q.MaxPhysOffset() <= off {
							want, seen = q.Max(), true
						}
					}
					if seen && info.QueueOffset != want {
						bad = fmt.Errorf("%w: %s/%d queue offset %d, expected %d", record.ErrCorrupt, k.topic, k.qid, info.QueueOffset, want)
						return nil
					}
					table[k] = info.QueueOffset + 1
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
		if err := cq.ValidateTopic(info.Topic); err != nil {
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
