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
	t := time.Now()
	phase := func(name string) {
		now := time.Now()
		s.recovery.Phases = append(s.recovery.Phases, RecoveryPhase{Name: name, Took: now.Sub(t)})
		t = now
	}
	defer phase("finish")
	st, err := s.openState()
	if err != nil {
		return err
	}
	segs, err := s.openSegments()
	if err != nil {
		return err
	}
	phase("segments")

	s.cqs, err = cq.OpenSet(cq.Options{FS: s.fs, EntriesPerFile: s.opts.CQEntriesPerFile, Logger: s.opts.Logger},
		filepath.Join(s.dir, ConsumeQueueDir))
	if err != nil {
		return fmt.Errorf("open consume queues: %w", err)
	}
	if len(segs) == 0 {
		return s.recoverEmpty(st)
	}
	b := st.bounds(segs[0].start, s.opts.SegmentSize, !s.opts.DisableCRCOnRecover)
	s.recovery.ScanFrom = b.scanFrom
	phase("queues")

	end, table, err := s.scan(b.scanFrom, b.durable, b.checkCRC)
	if err != nil {
		return err
	}
	s.recovery.End = end
	phase("scan")
	s.recovery.Redispatch = max(0, end-b.dispatchFrom)
	b.dispatchFrom = min(b.dispatchFrom, end)

	if err := s.cutAfter(end, st.distrustTail()); err != nil {
		return err
	}
	phase("cut")
	if err := s.truncateQueues(st, b, end); err != nil {
		return err
	}
	phase("truncate-queues")
	if err := s.epochs.TruncateSuffix(end); err != nil {
		return fmt.Errorf("truncate epoch history to %d: %w", end, err)
	}
	s.restoreQueueOffsets(table)
	// Only the checkpoint's flushed offset is known durable: after a
	// process crash the tail may still be only in the page cache. The flush
	// strategy makes it durable as usual once the store runs (a sync-flush
	// store's consumers see it only then), so opening does not wait for it.
	s.setPositions(b.minOff, end, b.dispatchFrom)
	s.openEnd.Store(end)
	s.flushed.Store(max(b.minOff, min(b.durable, end)))
	if last := s.segmentFor(end); last != nil {
		s.active = last
	} else {
		// The log ends exactly at a segment boundary; the next append rolls.
		segs := *s.segs.Load()
		s.active = segs[len(segs)-1]
	}
	return s.finishOpen(st)
}

// recoveryState is what the store's durable state says before the log is
// read: the last checkpoint, if any, and whether the abort marker (left by
// a run that did not Close) is present.
type recoveryState struct {
	ckptPath string
	ck       Checkpoint
	haveCk   bool
	crashed  bool
}

// distrustTail reports whether the log's tail may be torn and must be
// validated and cut: after a crash, or without a checkpoint to trust.
func (st recoveryState) distrustTail() bool { return st.crashed || !st.haveCk }

// recoveryBounds are the offsets recovery works between.
type recoveryBounds struct {
	minOff       int64 // the log's first byte
	durable      int64 // below it the checkpoint says flushed: a bad record there is corruption
	dispatchFrom int64 // records from here on are dispatched again
	scanFrom     int64 // validation starts here (<= dispatchFrom)
	checkCRC     bool
}

// bounds derives the recovery bounds of a log whose first segment starts at
// first; crc says whether CRCs may be checked (Options.DisableCRCOnRecover
// unset).
func (st recoveryState) bounds(first, segmentSize int64, crc bool) recoveryBounds {
	ck := st.ck
	b := recoveryBounds{minOff: first}
	if st.haveCk && ck.Min > first && ck.Min < first+segmentSize {
		b.minOff = ck.Min // a slave whose log starts mid-segment
	}
	b.durable, b.dispatchFrom = b.minOff, b.minOff
	if st.haveCk {
		b.durable = max(b.minOff, ck.Flushed)
		b.dispatchFrom = max(b.minOff, min(ck.Dispatched, ck.Flushed))
	}
	b.scanFrom = b.dispatchFrom
	if st.distrustTail() {
		b.checkCRC = crc
		if st.haveCk {
			// Re-check a window below the checkpoint too: damage to
			// recently flushed data is refused, not served.
			b.scanFrom = max(b.minOff, min(b.scanFrom, ck.VerifyFrom))
		} else {
			b.scanFrom = b.minOff
		}
	}
	return b
}

// openState opens the metadata and the epoch history and reads the
// checkpoint and the abort marker.
func (s *Store) openState() (recoveryState, error) {
	var err error
	if s.meta, err = meta.Open(s.fs, filepath.Join(s.dir, ConfigDir)); err != nil {
		return recoveryState{}, fmt.Errorf("open metadata: %w", err)
	}
	if s.epochs, err = epoch.Open(s.fs, filepath.Join(s.dir, EpochFile)); err != nil {
		return recoveryState{}, fmt.Errorf("open epoch history: %w", err)
	}
	st := recoveryState{ckptPath: filepath.Join(s.dir, CheckpointFile)}
	if st.ck, st.haveCk, err = ReadCheckpoint(s.fs, st.ckptPath); err != nil {
		return recoveryState{}, err
	}
	s.recovery.HadCheckpoint = st.haveCk
	_, aerr := s.fs.Stat(filepath.Join(s.dir, AbortFile))
	if aerr != nil && !errors.Is(aerr, fs.ErrNotExist) {
		return recoveryState{}, fmt.Errorf("stat abort marker: %w", aerr)
	}
	st.crashed = aerr == nil
	s.recovery.Crashed = st.crashed
	return st, nil
}

// openSegments opens the commitlog's segments, which must follow each other
// without a hole, and publishes them. An empty last segment (a crash while
// creating it) is removed.
func (s *Store) openSegments() ([]*segment, error) {
	starts, err := listSegments(s.fs, s.cl)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	for i, st := range starts {
		if i > 0 && st != starts[i-1]+s.opts.SegmentSize {
			return nil, fmt.Errorf("commitlog %s: segment %s does not follow %s (hole in the log)", s.cl, segmentName(st), segmentName(starts[i-1]))
		}
		path := filepath.Join(s.cl, segmentName(st))
		seg, err := openSegment(s.fs, path, st, s.opts.SegmentSize)
		if err != nil {
			if i == len(starts)-1 {
				if fi, serr := s.fs.Stat(path); serr == nil && fi.Size() == 0 {
					s.log.Warn("removing empty last segment", "file", path)
					if err := s.fs.Remove(path); err != nil {
						return nil, fmt.Errorf("remove empty segment: %w", err)
					}
					break
				}
			}
			for _, sg := range segs {
				sg.close()
			}
			return nil, err
		}
		segs = append(segs, seg)
	}
	s.segs.Store(&segs)
	return segs, nil
}

// recoverEmpty opens a store whose commitlog has no segment: nothing
// derived can be trusted, and the log restarts at the checkpoint's minimum
// (a slave that had started mid-stream) or 0.
func (s *Store) recoverEmpty(st recoveryState) error {
	if err := s.cqs.RemoveAll(); err != nil {
		return fmt.Errorf("clear consume queues of an empty log: %w", err)
	}
	base := int64(0)
	if st.haveCk && st.ck.Min > 0 {
		base = st.ck.Min
	}
	s.setPositions(base, base, base)
	s.recovery.End = base
	return s.finishOpen(st)
}

// truncateQueues applies the log's minimum to the consume queues and cuts
// them where dispatch will rewrite them. Queue entries past the re-dispatch
// point may be torn (written after the last queue flush) in ways a scan
// cannot see, such as a half written tags code: after a crash they are all
// cut and dispatch rewrites them. After a clean shutdown everything below
// the end was flushed whole, so they are cut at the end only.
func (s *Store) truncateQueues(st recoveryState, b recoveryBounds, end int64) error {
	cqCut := end
	if st.distrustTail() {
		cqCut = b.dispatchFrom
	}
	if err := s.cqs.SetMinPhysOffset(b.minOff); err != nil {
		return fmt.Errorf("correct consume queue minimums to %d: %w", b.minOff, err)
	}
	if err := s.cqs.TruncatePhys(cqCut); err != nil {
		return fmt.Errorf("truncate consume queues to %d: %w", cqCut, err)
	}
	return nil
}

// restoreQueueOffsets sets each queue's next queue offset afresh: what the
// queue holds, or what scanned records say (table), whichever is higher.
// Open and Truncate use it; appendMu is held or nothing else runs.
func (s *Store) restoreQueueOffsets(table map[queueKey]int64) {
	clear(s.queueOffsets)
	s.cqs.Each(func(q *cq.Queue) bool {
		s.queueOffsets[queueKey{q.Topic(), q.QueueID()}] = q.Max()
		return true
	})
	for k, v := range table {
		if v > s.queueOffsets[k] {
			s.queueOffsets[k] = v
		}
	}
}

func (s *Store) setPositions(minOff, end, dispatched int64) {
	s.minOffset.Store(minOff)
	s.wrotePos = end
	s.setCommitted(end)
	if s.wb != nil {
		s.wb.wrote.Store(end)
	}
	s.flushed.Store(end)
	s.dispatched.Store(dispatched)
}

// finishOpen writes the abort marker and a first checkpoint.
func (s *Store) finishOpen(st recoveryState) error {
	ck, haveCk := st.ck, st.haveCk
	var err error
	if s.ckpt, err = openCheckpointFile(s.fs, st.ckptPath, ck, haveCk); err != nil {
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
