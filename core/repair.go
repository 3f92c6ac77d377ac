package core

import (
	"fmt"
	"path/filepath"

	"github.com/keelmq/keel/core/cq"
	"github.com/keelmq/keel/core/vfs"
)

// RepairPlan is what Repair cuts (or would cut, on a dry run).
type RepairPlan struct {
	CutAt  int64  // physical offset of the first damaged record; -1 if the log is intact
	File   string // segment holding it
	Reason string // why the record is invalid
	// LogEnd is where the log's data ends before the repair (Report.LogEnd).
	LogEnd int64
	// BytesCut is LogEnd - CutAt: the log bytes the repair cuts, the
	// damaged record included. The same on a dry run and a real one.
	BytesCut int64
	// RecordsCut is how many records those bytes hold (Report.LostRecords:
	// the damaged one, or each damaged stretch, counted once, and every
	// intact record after it).
	RecordsCut      int
	SegmentsRemoved []string // later segment files removed
	// RebuildCheckpoint: the checkpoint was unreadable (ErrBadCheckpoint)
	// and is rewritten from the scan: flushed at the repaired end (after
	// every segment is synced), dispatched at the log's start, so the next
	// Open re-dispatches the whole log into the consume queues and
	// indexes (idempotently) and checks nothing below the end again.
	RebuildCheckpoint bool
}

// Repair finds the first damaged record of a closed store (checking CRCs)
// and, unless dryRun, truncates the log there explicitly: the rest of that
// segment is zeroed, later segments are removed, consume queues and the
// checkpoint follow. It is the operator's answer to a *CorruptError from
// Open; everything after the damage is lost, so run it with dryRun first.
// Only o.Dir, o.FS and o.CQEntriesPerFile are used; a zero CQEntriesPerFile is read off the existing queue files.
func Repair(o Options, dryRun bool) (*RepairPlan, error) {
	dir, fsys, perFile := o.Dir, o.FS, o.CQEntriesPerFile
	if fsys == nil {
		fsys = vfs.OS
	}
	if perFile == 0 {
		perFile = inferCQEntriesPerFile(fsys, filepath.Join(dir, ConsumeQueueDir))
	}
	rep, err := Inspect(dir, InspectOptions{FS: fsys, CheckCRC: true})
	if err != nil {
		return nil, err
	}
	plan := &RepairPlan{CutAt: rep.FirstBad, Reason: rep.FirstBadError, LogEnd: rep.LogEnd, RebuildCheckpoint: rep.CheckpointErr != nil}
	if rep.FirstBad < 0 {
		if plan.RebuildCheckpoint && !dryRun {
			if err := rebuildCheckpoint(fsys, dir, rep, rep.End); err != nil {
				return nil, err
			}
		}
		return plan, nil
	}
	plan.BytesCut, plan.RecordsCut = rep.LogEnd-rep.FirstBad, rep.LostRecords
	cut := rep.FirstBad
	for _, sg := range rep.Segments {
		switch {
		case sg.Start <= cut && cut < sg.Start+rep.SegmentSize:
			plan.File = sg.File
		case sg.Start > cut:
			plan.SegmentsRemoved = append(plan.SegmentsRemoved, sg.File)
		}
	}
	if dryRun {
		return plan, nil
	}
	if err := cutSegments(fsys, dir, plan, cut, rep.SegmentSize); err != nil {
		return nil, err
	}
	if err := truncateQueuesOffline(fsys, filepath.Join(dir, ConsumeQueueDir), perFile, cut); err != nil {
		return nil, err
	}
	if plan.RebuildCheckpoint {
		if err := rebuildCheckpoint(fsys, dir, rep, cut); err != nil {
			return nil, err
		}
		return plan, nil
	}
	if err := lowerCheckpoint(fsys, filepath.Join(dir, CheckpointFile), cut); err != nil {
		return nil, err
	}
	return plan, nil
}

// cutSegments zeroes plan.File from cut to its end, durably, and removes
// the segments after it.
func cutSegments(fsys vfs.FS, dir string, plan *RepairPlan, cut, segSize int64) error {
	f, err := fsys.OpenReadWrite(plan.File)
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	defer f.Close()
	rel := cut % segSize
	if err := f.ZeroRange(rel, segSize-rel); err != nil {
		return fmt.Errorf("repair: zero %s from %d: %w", plan.File, cut, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("repair: sync %s: %w", plan.File, err)
	}
	for _, p := range plan.SegmentsRemoved {
		if err := fsys.Remove(p); err != nil {
			return fmt.Errorf("repair: remove %s: %w", p, err)
		}
	}
	if err := fsys.SyncDir(filepath.Join(dir, CommitlogDir)); err != nil {
		return fmt.Errorf("repair: sync commitlog dir: %w", err)
	}
	return nil
}

// truncateQueuesOffline drops, durably, every consume queue entry under
// qroot at or beyond the commitlog offset cut.
func truncateQueuesOffline(fsys vfs.FS, qroot string, perFile int, cut int64) error {
	set, err := cq.OpenSet(cq.Options{FS: fsys, EntriesPerFile: perFile}, qroot)
	if err != nil {
		return fmt.Errorf("repair: open consume queues: %w", err)
	}
	defer set.Close()
	if err := set.TruncatePhys(cut); err != nil {
		return fmt.Errorf("repair: truncate consume queues: %w", err)
	}
	if err := set.Flush(); err != nil {
		return fmt.Errorf("repair: flush consume queues: %w", err)
	}
	return nil
}

// lowerCheckpoint lowers the flushed, dispatched and confirm offsets of the
// checkpoint at ckPath, if there is one, to a log cut at cut.
func lowerCheckpoint(fsys vfs.FS, ckPath string, cut int64) error {
	ck, ok, err := ReadCheckpoint(fsys, ckPath)
	if err != nil || !ok {
		return err
	}
	cf, err := openCheckpointFile(fsys, ckPath, ck, true)
	if err != nil {
		return err
	}
	defer cf.close()
	ck.Flushed, ck.Dispatched, ck.Confirm = min(ck.Flushed, cut), min(ck.Dispatched, cut), min(ck.Confirm, cut)
	if err := cf.write(ck); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	return nil
}

// rebuildCheckpoint replaces an unreadable checkpoint with one built from a
// full CRC scan that found the log valid up to end: every segment is synced
// first, so "flushed up to end" is true when it is written; dispatched is
// the log's start (everything is dispatched again on the next Open).
func rebuildCheckpoint(fsys vfs.FS, dir string, rep *Report, end int64) error {
	minOff := end
	if len(rep.Segments) > 0 {
		minOff = min(end, rep.Segments[0].Start)
	}
	for _, sg := range rep.Segments {
		if sg.Start > end {
			continue
		}
		f, err := fsys.OpenReadWrite(sg.File)
		if err != nil {
			return fmt.Errorf("repair: rebuild checkpoint: %w", err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("repair: rebuild checkpoint: sync %s: %w", sg.File, err)
		}
	}
	ckPath := filepath.Join(dir, CheckpointFile)
	tmp := ckPath + ".rebuilt"
	cf, err := openCheckpointFile(fsys, tmp, Checkpoint{}, false)
	if err != nil {
		return fmt.Errorf("repair: rebuild checkpoint: %w", err)
	}
	c := Checkpoint{Flushed: end, Dispatched: minOff, Confirm: minOff, Min: minOff, VerifyFrom: end}
	if err := cf.write(c); err == nil {
		err = cf.write(c) // both slots valid
	}
	if cerr := cf.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("repair: rebuild checkpoint: %w", err)
	}
	if err := fsys.Rename(tmp, ckPath); err != nil {
		return fmt.Errorf("repair: rebuild checkpoint: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("repair: rebuild checkpoint: sync %s: %w", dir, err)
	}
	return nil
}

// inferCQEntriesPerFile reads the size of any consume queue file (they are
// all the same size); DefaultCQEntriesPerFile if there is none.
func inferCQEntriesPerFile(fsys vfs.FS, root string) int {
	topics, _ := fsys.ReadDir(root)
	for _, t := range topics {
		qids, _ := fsys.ReadDir(filepath.Join(root, t))
		for _, q := range qids {
			files, _ := fsys.ReadDir(filepath.Join(root, t, q))
			for _, f := range files {
				if fi, err := fsys.Stat(filepath.Join(root, t, q, f)); err == nil && fi.Size() >= cq.EntrySize {
					return int(fi.Size() / cq.EntrySize)
				}
			}
		}
	}
	return DefaultCQEntriesPerFile
}
