package cq

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// load opens the files and recovers the write position.
func (q *Queue) load() error {
	names, err := q.fs.ReadDir(q.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("list %s: %w", q.dir, err)
	}
	var files []*qfile
	fail := func(err error) error {
		for _, f := range files {
			_ = f.close()
		}
		return err
	}
	firstShort := -1
	removedAny := false
	for _, name := range names {
		start, ok := q.parseName(name)
		if !ok {
			q.log.Warn("cq: ignoring unexpected file in queue directory", "dir", q.dir, "name", name)
			continue
		}
		if n := len(files); n > 0 && files[n-1].start+q.epf != start {
			return fail(fmt.Errorf("%w: %s: file %s does not follow %s", ErrCorrupt, q.dir, name, filepath.Base(files[n-1].path)))
		}
		p := filepath.Join(q.dir, name)
		f, err := q.fs.OpenReadWrite(p)
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", p, err))
		}
		size, err := f.Size()
		if err != nil {
			_ = f.Close()
			return fail(fmt.Errorf("size of %s: %w", p, err))
		}
		if size > q.fileSize {
			_ = f.Close()
			return fail(fmt.Errorf("%w: %s is %d bytes, want %d (EntriesPerFile changed?)", ErrCorrupt, p, size, q.fileSize))
		}
		if size < q.fileSize {
			q.log.Warn("cq: extending short queue file", "file", p, "size", size, "want", q.fileSize)
			if err := f.Allocate(0, q.fileSize); err != nil {
				_ = f.Close()
				return fail(fmt.Errorf("extend %s: %w", p, err))
			}
			if firstShort < 0 {
				firstShort = len(files)
			}
		}
		m, err := f.Map(int(q.fileSize))
		if err != nil {
			_ = f.Close()
			return fail(fmt.Errorf("map %s: %w", p, err))
		}
		files = append(files, &qfile{start: start, path: p, f: f, m: m, b: m.Bytes()})
	}
	if len(files) == 0 {
		return nil
	}

	// Recover the write position.
	scan := max(len(files)-3, 0)
	if firstShort >= 0 && firstShort < scan {
		scan = firstShort
	}
	prevEnd := int64(-1) // End() of the previous real entry; -1: none yet
	if scan > 0 {
		prev := files[scan-1]
		if e := prev.entry(prev.start + q.epf - 1); !e.IsBlank() {
			prevEnd = e.End()
		}
	}
	scanStart := files[scan].start
	pos := scanStart
	end := files[len(files)-1].start + q.epf
scanLoop:
	for ; pos < end; pos++ {
		f := files[(pos-files[0].start)/q.epf]
		e := f.entry(pos)
		switch {
		case !e.valid():
			break scanLoop
		case e.IsBlank():
			if prevEnd >= 0 || e != blankEntry {
				break scanLoop // a blank after a real entry is garbage
			}
		default:
			if e.Offset < prevEnd {
				break scanLoop
			}
			prevEnd = e.End()
		}
	}
	first := firstReal(files, q.epf, pos)
	if first >= pos {
		q.log.Info("cq: no valid entries, removing queue files", "dir", q.dir, "files", len(files))
		for i := len(files) - 1; i >= 0; i-- {
			if err := q.removeFile(files[i]); err != nil {
				return fail(err)
			}
			files = files[:i]
		}
		return q.syncDir()
	}
	// Keep the file that contains pos (or, at a file boundary, the full
	// file before it); drop the rest.
	keep := int((pos-1-files[0].start)/q.epf) + 1
	if keep < len(files) {
		q.log.Info("cq: removing queue files past the recovered end", "dir", q.dir, "files", len(files)-keep, "max", pos)
		// Last first, so an interrupted removal leaves no gap.
		for i := len(files) - 1; i >= keep; i-- {
			if err := q.removeFile(files[i]); err != nil {
				return fail(err)
			}
			files = files[:i]
		}
		removedAny = true
	}
	last := files[len(files)-1]
	if off := (pos - last.start) * EntrySize; off < q.fileSize && !allZero(last.b[off:]) {
		q.log.Info("cq: zeroing garbage past the recovered end", "file", last.path, "from", off)
		if err := last.f.ZeroRange(off, q.fileSize-off); err != nil {
			return fail(fmt.Errorf("zero tail of %s: %w", last.path, err))
		}
		if err := last.f.Datasync(); err != nil {
			return fail(fmt.Errorf("sync %s: %w", last.path, err))
		}
	}
	if removedAny {
		if err := q.syncDir(); err != nil {
			return fail(err)
		}
	}
	q.files.Store(&files)
	q.min.Store(first)
	q.maxPhys.Store(q.readLocked(files, pos-1).End())
	// The recovered tail may still be only in the page cache (a process
	// crash leaves it there): the next Flush syncs it again.
	q.flushed.Store(scanStart)
	q.max.Store(pos)
	return nil
}

// firstReal returns the queue offset of the first non-blank entry below
// limit, or limit if there is none. Blanks only ever fill the start of the
// first file.
func firstReal(files []*qfile, epf, limit int64) int64 {
	if len(files) == 0 {
		return limit
	}
	f := files[0]
	hi := min(limit, f.start+epf)
	// Binary search for the first non-blank in [f.start, hi).
	lo := f.start
	for lo < hi {
		mid := lo + (hi-lo)/2
		if f.entry(mid).IsBlank() {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	// If the whole first file is blank (Put never produces that), lo is
	// the next file's first entry.
	return lo
}
