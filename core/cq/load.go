package cq

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// load opens the files and recovers the write position (see OpenQueue).
func (q *Queue) load() error {
	names, err := q.fs.ReadDir(q.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("list %s: %w", q.dir, err)
	}
	files, firstShort, err := q.openFiles(names)
	if err != nil || len(files) == 0 {
		return err
	}
	scanStart, pos := q.scanValid(files, firstShort)
	first := firstReal(files, q.epf, pos)
	if first >= pos {
		q.log.Info("cq: no valid entries, removing queue files", "dir", q.dir, "files", len(files))
		if _, err := q.dropFiles(files, 0); err != nil {
			return err
		}
		return q.syncDir()
	}
	if files, err = q.cutRecovered(files, pos); err != nil {
		return err
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

// openFiles opens and maps the queue files among names, in order, and
// returns them with the index of the first one that was short (-1 if
// none). Files must follow each other without a gap (ErrCorrupt); other
// names are ignored with a warning. On error no file stays open.
func (q *Queue) openFiles(names []string) (files []*qfile, firstShort int, err error) {
	firstShort = -1
	for _, name := range names {
		start, ok := q.parseName(name)
		if !ok {
			q.log.Warn("cq: ignoring unexpected file in queue directory", "dir", q.dir, "name", name)
			continue
		}
		if n := len(files); n > 0 && files[n-1].start+q.epf != start {
			closeFiles(files)
			return nil, -1, fmt.Errorf("%w: %s: file %s does not follow %s", ErrCorrupt, q.dir, name, filepath.Base(files[n-1].path))
		}
		f, short, err := q.openFile(name, start)
		if err != nil {
			closeFiles(files)
			return nil, -1, err
		}
		if short && firstShort < 0 {
			firstShort = len(files)
		}
		files = append(files, f)
	}
	return files, firstShort, nil
}

// openFile opens and maps the queue file name, whose first entry is queue
// offset start. A file larger than the configured size is ErrCorrupt; a
// shorter one (a crash before its size became durable) is extended with
// zeros and reported short.
func (q *Queue) openFile(name string, start int64) (qf *qfile, short bool, err error) {
	p := filepath.Join(q.dir, name)
	f, err := q.fs.OpenReadWrite(p)
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", p, err)
	}
	fail := func(err error) (*qfile, bool, error) {
		_ = f.Close()
		return nil, false, err
	}
	size, err := f.Size()
	if err != nil {
		return fail(fmt.Errorf("size of %s: %w", p, err))
	}
	if size > q.fileSize {
		return fail(fmt.Errorf("%w: %s is %d bytes, want %d (EntriesPerFile changed?)", ErrCorrupt, p, size, q.fileSize))
	}
	if size < q.fileSize {
		q.log.Warn("cq: extending short queue file", "file", p, "size", size, "want", q.fileSize)
		if err := f.Allocate(0, q.fileSize); err != nil {
			return fail(fmt.Errorf("extend %s: %w", p, err))
		}
		short = true
	}
	m, err := f.Map(int(q.fileSize))
	if err != nil {
		return fail(fmt.Errorf("map %s: %w", p, err))
	}
	return &qfile{start: start, path: p, f: f, m: m, b: m.Bytes()}, short, nil
}

// scanValid finds the recovered write position as RocketMQ does: it scans
// from the third-last file (or the first short file, if earlier) to the
// first invalid unit (see OpenQueue) and returns where the scan started and
// that position.
func (q *Queue) scanValid(files []*qfile, firstShort int) (scanStart, pos int64) {
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
	scanStart = files[scan].start
	end := files[len(files)-1].start + q.epf
	for pos = scanStart; pos < end; pos++ {
		e := files[(pos-files[0].start)/q.epf].entry(pos)
		switch {
		case !e.valid():
			return scanStart, pos
		case e.IsBlank():
			if prevEnd >= 0 || e != blankEntry {
				return scanStart, pos // a blank after a real entry is garbage
			}
		default:
			if e.Offset < prevEnd {
				return scanStart, pos
			}
			prevEnd = e.End()
		}
	}
	return scanStart, pos
}

// cutRecovered removes what lies past the recovered end pos (> the first
// real entry): the files after the one that contains pos (or, at a file
// boundary, the full file before it) and any garbage after pos in that
// file, made durable. It returns the files kept; on error no file stays
// open.
func (q *Queue) cutRecovered(files []*qfile, pos int64) ([]*qfile, error) {
	keep := int((pos-1-files[0].start)/q.epf) + 1
	removed := keep < len(files)
	if removed {
		q.log.Info("cq: removing queue files past the recovered end", "dir", q.dir, "files", len(files)-keep, "max", pos)
		var err error
		if files, err = q.dropFiles(files, keep); err != nil {
			return nil, err
		}
	}
	fail := func(err error) ([]*qfile, error) {
		closeFiles(files)
		return nil, err
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
	if removed {
		if err := q.syncDir(); err != nil {
			return fail(err)
		}
	}
	return files, nil
}

// dropFiles removes files[keep:], last first so that an interrupted
// removal leaves no gap, and returns files[:keep]. The caller syncs the
// directory. On error no file stays open.
func (q *Queue) dropFiles(files []*qfile, keep int) ([]*qfile, error) {
	for i := len(files) - 1; i >= keep; i-- {
		if err := q.removeFile(files[i]); err != nil {
			closeFiles(files[:i+1])
			return nil, err
		}
		files = files[:i]
	}
	return files, nil
}

// closeFiles closes files, ignoring errors: for abandoning a load.
func closeFiles(files []*qfile) {
	for _, f := range files {
		_ = f.close()
	}
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
