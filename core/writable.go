package core

import (
	"fmt"
	"time"
)

// Writable reports why appends would fail right now, or nil: ErrClosed,
// ErrReadOnly, or ErrDiskFull (usage at or above the warning ratio, as of
// a reading at most diskCheckEvery or diskCheckBytes of appends old).
func (s *Store) Writable() error {
	switch {
	case s.closed.Load():
		return ErrClosed
	case s.readOnly.Load():
		return ErrReadOnly
	case s.recheckDisk():
		return fmt.Errorf("appends refused above %.0f%% disk usage: %w", s.opts.Retention.WarningRatio*100, ErrDiskFull)
	}
	return nil
}

// How stale the disk usage reading behind Writable may be: the retention
// loop re-reads it every diskCheckEvery, and an append re-reads it after
// diskCheckBytes of appends since the last reading (a reading only from the
// 10 s retention pass let appends run on above the warning ratio that
// long; statfs on every append would cost the append path).
const (
	diskCheckEvery = 250 * time.Millisecond
	diskCheckBytes = 64 << 20
)

// recheckDisk re-reads disk usage once diskCheckBytes have been committed
// since the last reading (two atomic loads otherwise) and reports whether
// the disk is full.
func (s *Store) recheckDisk() bool {
	c := s.committed.Load()
	if at := s.diskCheckAt.Load(); c-at >= diskCheckBytes && s.diskCheckAt.CompareAndSwap(at, c) {
		s.checkDisk()
	}
	return s.diskFull.Load()
}

// DiskUsedRatio is the used fraction of the filesystem holding the store,
// or 0 if unknown.
func (s *Store) DiskUsedRatio() float64 {
	du, err := s.fs.DiskUsage(s.dir)
	if err != nil {
		return 0
	}
	return du.UsedRatio()
}

// checkDisk updates the disk-full flag: set above the warning ratio,
// cleared below the clean-forcibly ratio (RocketMQ's hysteresis). It
// returns the used ratio.
func (s *Store) checkDisk() float64 {
	du, err := s.fs.DiskUsage(s.dir)
	if err != nil {
		if !s.diskUnknown.Swap(true) { // once, not every reading
			s.log.Warn("disk usage unknown", "err", err)
		}
		return 0
	}
	s.diskUnknown.Store(false)
	r := du.UsedRatio()
	ro := s.opts.Retention
	switch {
	case r >= ro.WarningRatio:
		if !s.diskFull.Swap(true) {
			s.log.Error("disk full: refusing appends", "used", fmt.Sprintf("%.1f%%", r*100), "warning_ratio", ro.WarningRatio)
		}
	case r < ro.CleanForciblyRatio:
		if s.diskFull.Swap(false) {
			s.log.Info("disk space back: accepting appends", "used", fmt.Sprintf("%.1f%%", r*100))
		}
	}
	return r
}
