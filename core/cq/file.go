package cq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"github.com/keelmq/keel/core/vfs"
)

// fileNameLen is the length of a queue file's name (a zero-padded decimal
// logical byte offset).
const fileNameLen = 20

// qfile is one mapped queue file.
type qfile struct {
	start int64 // queue offset of the file's first entry
	path  string
	f     vfs.File
	m     vfs.Mapping
	b     []byte // the mapping, len fileSize
}

func (f *qfile) entry(queueOffset int64) Entry {
	i := (queueOffset - f.start) * EntrySize
	return decodeEntry(f.b[i : i+EntrySize])
}

func (f *qfile) close() error {
	var errs []error
	if f.m != nil {
		if err := f.m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("unmap %s: %w", f.path, err))
		}
		f.m, f.b = nil, nil
	}
	if f.f != nil {
		if err := f.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", f.path, err))
		}
		f.f = nil
	}
	return errors.Join(errs...)
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (q *Queue) parseName(name string) (start int64, ok bool) {
	if len(name) != fileNameLen {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	off, err := strconv.ParseInt(name, 10, 64)
	if err != nil || off%q.fileSize != 0 {
		return 0, false
	}
	return off / EntrySize, true
}

func (q *Queue) fileName(start int64) string {
	return filepath.Join(q.dir, fmt.Sprintf("%020d", start*EntrySize))
}

// removeFile unmaps, closes and removes f. The caller syncs the directory.
func (q *Queue) removeFile(f *qfile) error {
	err := f.close()
	if rerr := q.fs.Remove(f.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("remove %s: %w", f.path, rerr))
	}
	return err
}

func (q *Queue) syncDir() error {
	if err := q.fs.SyncDir(q.dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", q.dir, err)
	}
	return nil
}

// createFile creates, preallocates and maps the file whose first entry is
// queue offset start.
func (q *Queue) createFile(start int64) (*qfile, error) {
	if len(*q.files.Load()) == 0 {
		// Create the queue directory (and missing parents); Flush makes
		// their names durable.
		var missing []string
		for d := q.dir; ; d = filepath.Dir(d) {
			if _, err := q.fs.Stat(d); err == nil {
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("stat %s: %w", d, err)
			}
			missing = append(missing, filepath.Dir(d))
			if filepath.Dir(d) == d {
				break
			}
		}
		if len(missing) > 0 {
			if err := q.fs.MkdirAll(q.dir, 0o755); err != nil {
				return nil, fmt.Errorf("create %s: %w", q.dir, err)
			}
			if prev := q.parentSyncs.Load(); prev != nil {
				missing = append(missing, *prev...)
			}
			q.parentSyncs.Store(&missing)
		}
	}
	p := q.fileName(start)
	f, err := q.fs.Create(p)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	q.dirDirty.Store(true)
	cleanup := func(err error) (*qfile, error) {
		_ = f.Close()
		_ = q.fs.Remove(p)
		return nil, err
	}
	if err := f.Allocate(0, q.fileSize); err != nil {
		return cleanup(fmt.Errorf("preallocate %s: %w", p, err))
	}
	m, err := f.Map(int(q.fileSize))
	if err != nil {
		return cleanup(fmt.Errorf("map %s: %w", p, err))
	}
	return &qfile{start: start, path: p, f: f, m: m, b: m.Bytes()}, nil
}
