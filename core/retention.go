package core

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/keelmq/keel/core/record"
)

func (s *Store) retentionLoop() {
	s.checkDisk()
	t := time.NewTicker(s.opts.Retention.CleanEvery)
	defer t.Stop()
	disk := time.NewTicker(diskCheckEvery) // Writable's reading, kept fresh
	defer disk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-disk.C:
			s.checkDisk()
		case <-t.C:
			if _, err := s.Clean(false); err != nil {
				s.log.Error("retention", "err", err)
			}
		}
	}
}

// Clean runs one retention pass and returns the number of segments
// deleted. Segments are deleted oldest first, never the active one and
// never with a hole: expired segments (last write older than
// FileReservedTime) at a DeleteWhen hour or when usage is above
// DiskMaxUsedRatio; any segment when usage is above CleanForciblyRatio or
// force is set. A segment's last write time is the store timestamp of the
// first record of the segment after it.
func (s *Store) Clean(force bool) (int, error) {
	used := s.checkDisk()
	ro := s.opts.Retention
	now := s.opts.Now()
	hourOK := slices.Contains(ro.DeleteWhen, time.UnixMilli(now).Hour())
	forcibly := force || used >= ro.CleanForciblyRatio
	byAge := ro.FileReservedTime > 0 && (hourOK || used >= ro.DiskMaxUsedRatio)
	if !forcibly && !byAge {
		return 0, nil
	}
	deleted, early := 0, 0
	for deleted < ro.MaxDeletePerRun {
		segs := *s.segs.Load()
		if len(segs) < 2 {
			break
		}
		first, next := segs[0], segs[1]
		if !s.deletable(next.start) {
			break
		}
		ts, err := s.firstTimestamp(next)
		expired := err == nil && ro.FileReservedTime > 0 && now-ts >= ro.FileReservedTime.Milliseconds()
		if !forcibly && !expired {
			break
		}
		if err := s.deleteFirst(first, next.start); err != nil {
			return deleted, err
		}
		deleted++
		if !expired {
			early++
			s.forcedDeletes.Add(1)
		}
		if !force && s.checkDisk() < ro.DiskMaxUsedRatio && !byAge {
			break
		}
	}
	switch {
	case early > 0:
		// Messages consumers may not have read yet are gone: an operator
		// must hear of it (and ForcedDeletions counts it for metrics).
		s.log.Warn("retention deleted segments before their retention time", "count", deleted, "unexpired", early,
			"min", s.minOffset.Load(), "disk_used", fmt.Sprintf("%.1f%%", used*100), "clean_forcibly_ratio", ro.CleanForciblyRatio, "forced", force)
	case deleted > 0:
		s.log.Info("retention deleted segments", "count", deleted, "min", s.minOffset.Load(), "disk_used", fmt.Sprintf("%.1f%%", used*100))
	}
	return deleted, nil
}

// ForcedDeletions counts the segments retention deleted before their
// retention time (disk usage above the clean-forcibly ratio, or Clean(true))
// since Open.
func (s *Store) ForcedDeletions() int64 { return s.forcedDeletes.Load() }

func (s *Store) firstTimestamp(seg *segment) (int64, error) {
	var ts int64
	err := seg.view(0, min(s.opts.SegmentSize, 1<<16), func(b []byte) error {
		_, info, err := record.Check(b, false)
		ts = info.StoreTimestamp
		return err
	})
	return ts, err
}

// deletable reports whether the log minimum may move up to newMin: never
// past what has not been dispatched or flushed yet. Retention checks it
// before reading a segment and again under appendMu, where dispatched
// (RedispatchFromCheckpoint, Truncate) and flushed (Truncate) are lowered.
func (s *Store) deletable(newMin int64) bool {
	return newMin <= s.dispatched.Load() && newMin <= s.flushed.Load()
}

// deleteFirst removes the oldest segment; the log minimum becomes newMin.
func (s *Store) deleteFirst(first *segment, newMin int64) error {
	s.appendMu.Lock()
	segs := *s.segs.Load()
	if len(segs) < 2 || segs[0] != first {
		s.appendMu.Unlock()
		return errors.New("retention: segment list changed")
	}
	if !s.deletable(newMin) {
		s.appendMu.Unlock()
		return errors.New("retention: the dispatcher was rewound below the segment's end")
	}
	rest := slices.Clone(segs[1:])
	s.segs.Store(&rest)
	s.minOffset.Store(newMin)
	if invariants {
		s.assertOrder("retention")
	}
	s.appendMu.Unlock()
	if err := first.remove(s.fs); err != nil {
		return err
	}
	if err := s.fs.SyncDir(s.cl); err != nil {
		return fmt.Errorf("sync commitlog dir after retention: %w", err)
	}
	if err := s.cqs.SetMinPhysOffset(newMin); err != nil {
		return fmt.Errorf("move consume queue minimums to %d: %w", newMin, err)
	}
	if err := s.epochs.TruncatePrefix(newMin); err != nil {
		return fmt.Errorf("truncate epoch history below %d: %w", newMin, err)
	}
	return s.Checkpoint()
}
