package cq

import (
	"errors"
	"fmt"
)

// TruncatePhys drops every entry whose commitlog offset is >= physOffset:
// it zeroes them in the file that keeps some entries (and syncs it), removes
// whole files past that point, and lowers Max, MaxPhysOffset, Min and the
// flushed offset to match. If no real entry remains, all files are removed
// and the queue is empty (Max() == 0, and the next Put may start anywhere).
// Recovery calls it with the commitlog's valid end, replication with the
// point where logs diverged.
//
// It must not run concurrently with Put. Readers wait for it.
func (q *Queue) TruncatePhys(physOffset int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return ErrClosed
	}
	fl := *q.files.Load()
	if len(fl) == 0 {
		return nil
	}
	mx := q.max.Load()
	first := firstReal(fl, q.epf, mx)
	n := q.searchPhys(fl, first, mx, physOffset)
	if n == mx {
		return nil
	}
	q.log.Info("cq: truncating", "phys", physOffset, "from", n, "max", mx)
	if n <= first {
		return q.removeAllLocked(fl)
	}
	k := int((n - 1 - fl[0].start) / q.epf) // file holding the new last entry
	keep := fl[:k+1]
	drop := fl[k+1:]
	var errs []error
	last := keep[k]
	if off := (n - last.start) * EntrySize; off < q.fileSize {
		zeroEnd := (min(mx, last.start+q.epf) - last.start) * EntrySize
		if err := last.f.ZeroRange(off, zeroEnd-off); err != nil {
			return fmt.Errorf("truncate %s/%d: zero %s: %w", q.topic, q.id, last.path, err)
		}
		if err := last.f.Datasync(); err != nil {
			errs = append(errs, fmt.Errorf("truncate %s/%d: sync %s: %w", q.topic, q.id, last.path, err))
		}
	}
	nfl := append([]*qfile(nil), keep...)
	q.files.Store(&nfl)
	q.max.Store(n)
	q.maxPhys.Store(q.readLocked(nfl, n-1).End())
	if q.min.Load() > n {
		q.min.Store(n)
	}
	if q.flushed.Load() > n {
		q.flushed.Store(n)
	}
	for i := len(drop) - 1; i >= 0; i-- { // last first: no gap if interrupted
		if err := q.removeFile(drop[i]); err != nil {
			errs = append(errs, fmt.Errorf("truncate %s/%d: %w", q.topic, q.id, err))
		}
	}
	if len(drop) > 0 {
		if err := q.syncDir(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeAllLocked removes every file and resets the queue to empty.
func (q *Queue) removeAllLocked(fl []*qfile) error {
	empty := []*qfile{}
	q.files.Store(&empty)
	q.max.Store(0)
	q.min.Store(0)
	q.maxPhys.Store(0)
	q.flushed.Store(0)
	var errs []error
	for i := len(fl) - 1; i >= 0; i-- { // last first: no gap if interrupted
		if err := q.removeFile(fl[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(fl) > 0 {
		if err := q.syncDir(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove files of %s/%d: %w", q.topic, q.id, errors.Join(errs...))
	}
	return nil
}

// SetMinPhysOffset applies retention: the commitlog's minimum offset is now
// minPhys. It deletes, oldest first, whole files whose last entry ends at or
// below minPhys, never the last file and stopping at the first file it keeps
// (so there are no holes), and moves Min() forward to the first entry whose
// commitlog offset is >= minPhys (to Max() if there is none). Min never
// moves backwards. It returns the number of files deleted; an error removing
// a file stops the deletion and is returned with the count so far.
//
// It must not run concurrently with Put. Readers wait for it.
func (q *Queue) SetMinPhysOffset(minPhys int64) (deleted int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return 0, ErrClosed
	}
	fl := *q.files.Load()
	if len(fl) == 0 {
		return 0, nil
	}
	mx := q.max.Load()
	var errs []error
	for deleted < len(fl)-1 {
		f := fl[deleted]
		e := f.entry(f.start + q.epf - 1)
		if !e.IsBlank() && e.End() > minPhys {
			break
		}
		fl2 := fl[deleted+1:]
		cp := append([]*qfile(nil), fl2...)
		q.files.Store(&cp)
		if rerr := q.removeFile(f); rerr != nil {
			errs = append(errs, rerr)
			deleted++
			break
		}
		deleted++
	}
	if deleted > 0 {
		q.log.Info("cq: deleted expired files", "files", deleted, "minPhys", minPhys)
		fl = *q.files.Load()
		if serr := q.syncDir(); serr != nil {
			errs = append(errs, serr)
		}
	}
	lo := max(q.min.Load(), firstReal(fl, q.epf, mx), fl[0].start)
	if lo < mx {
		lo = q.searchPhys(fl, lo, mx, minPhys)
	} else {
		lo = mx
	}
	if lo > q.min.Load() {
		q.min.Store(lo)
	}
	if len(errs) > 0 {
		return deleted, fmt.Errorf("retention of %s/%d: %w", q.topic, q.id, errors.Join(errs...))
	}
	return deleted, nil
}
