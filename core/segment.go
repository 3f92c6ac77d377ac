package core

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/keelmq/keel/core/vfs"
)

// segment is one preallocated, memory-mapped commitlog file named by its
// 20-digit start offset.
//
// Bytes are written into data under the store's append lock (or by the
// single replication writer) and read by copying out of data while holding
// mu for reading, so retention can unmap a segment only when no reader is
// inside it.
type segment struct {
	start int64
	size  int64
	path  string

	mu      sync.RWMutex // guards f, m and data against unmap
	f       vfs.File
	m       vfs.Mapping
	data    []byte
	removed bool

	warmed atomic.Int64 // bytes from the start prefaulted for writing
}

func segmentName(start int64) string { return fmt.Sprintf("%020d", start) }

func parseSegmentName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(name, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// createSegment creates and preallocates a segment under a temporary name,
// makes it durable and renames it into place, so a crash never leaves a
// short segment behind under a real name.
func createSegment(fs vfs.FS, dir string, start, size int64) (*segment, error) {
	final := filepath.Join(dir, segmentName(start))
	tmp := final + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", tmp, err)
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		fs.Remove(tmp)
		return nil, err
	}
	if err := f.Allocate(0, size); err != nil {
		return fail(fmt.Errorf("preallocate segment %s (%d bytes): %w", tmp, size, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("sync new segment %s: %w", tmp, err))
	}
	if err := fs.Rename(tmp, final); err != nil {
		return fail(fmt.Errorf("rename segment into place %s: %w", final, err))
	}
	if err := fs.SyncDir(dir); err != nil {
		return fail(fmt.Errorf("sync commitlog dir after creating %s: %w", final, err))
	}
	f.Close()
	return openSegment(fs, final, start, size)
}

func openSegment(fs vfs.FS, path string, start, size int64) (*segment, error) {
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	n, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat segment %s: %w", path, err)
	}
	if n != size {
		f.Close()
		return nil, fmt.Errorf("segment %s is %d bytes, want %d (segment size is fixed for a store)", path, n, size)
	}
	m, err := f.Map(int(size))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("map segment %s: %w", path, err)
	}
	return &segment{start: start, size: size, path: path, f: f, m: m, data: m.Bytes()}, nil
}

// readAt copies len(p) bytes at physical offset off (inside this segment).
func (s *segment) readAt(p []byte, off int64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.removed {
		return fmt.Errorf("segment %s was deleted by retention: %w", s.path, ErrOffset)
	}
	if s.data == nil {
		return fmt.Errorf("segment %s: %w", s.path, ErrClosed)
	}
	rel := off - s.start
	if rel < 0 || rel+int64(len(p)) > s.size {
		return fmt.Errorf("read [%d,%d) outside segment %s: %w", off, off+int64(len(p)), s.path, ErrOffset)
	}
	copy(p, s.data[rel:])
	return nil
}

// view runs fn on the segment's bytes [rel, rel+n) while holding the read
// lock. fn must not retain the slice.
func (s *segment) view(rel, n int64, fn func([]byte) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.removed {
		return fmt.Errorf("segment %s was deleted by retention: %w", s.path, ErrOffset)
	}
	if s.data == nil {
		return fmt.Errorf("segment %s: %w", s.path, ErrClosed)
	}
	if rel < 0 || rel+n > s.size {
		return fmt.Errorf("view [%d,%d) outside segment %s: %w", s.start+rel, s.start+rel+n, s.path, ErrOffset)
	}
	return fn(s.data[rel : rel+n])
}

// writeAt writes p at rel with pwrite(2).
func (s *segment) writeAt(p []byte, rel int64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.f == nil || s.removed {
		return fmt.Errorf("write segment %s: %w", s.path, ErrClosed)
	}
	if _, err := s.f.WriteAt(p, rel); err != nil {
		return fmt.Errorf("write segment %s at %d: %w", s.path, rel, err)
	}
	return nil
}

// startWriteback hints the kernel to begin writing [rel, rel+n) back; see
// vfs.WritebackStarter. Errors are ignored: it is only a hint.
func (s *segment) startWriteback(rel, n int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ws, ok := s.f.(vfs.WritebackStarter); ok && !s.removed {
		_ = ws.StartWriteback(rel, n)
	}
}

func (s *segment) sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.removed {
		return nil
	}
	if s.f == nil {
		return fmt.Errorf("sync segment %s: %w", s.path, ErrClosed)
	}
	if err := s.f.Datasync(); err != nil {
		return fmt.Errorf("fdatasync segment %s: %w", s.path, err)
	}
	return nil
}

func (s *segment) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeLocked()
}

func (s *segment) closeLocked() error {
	if s.m == nil {
		return nil
	}
	err1 := s.m.Close()
	err2 := s.f.Close()
	s.m, s.f, s.data = nil, nil, nil
	if err1 != nil {
		return fmt.Errorf("unmap segment %s: %w", s.path, err1)
	}
	if err2 != nil {
		return fmt.Errorf("close segment %s: %w", s.path, err2)
	}
	return nil
}

// remove unmaps the segment (waiting for readers to leave) and deletes its
// file. The caller syncs the directory.
func (s *segment) remove(fs vfs.FS) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = true
	if err := s.closeLocked(); err != nil {
		return err
	}
	if err := fs.Remove(s.path); err != nil {
		return fmt.Errorf("remove segment %s: %w", s.path, err)
	}
	return nil
}

// warm prefaults [from, to) of the mapping for writing when the mapping
// supports it; false means it does not (or failed) and warming should stop.
func (s *segment) warm(from, to int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.m == nil || s.removed {
		return true
	}
	p, ok := s.m.(vfs.Populator)
	if !ok {
		return false
	}
	if err := p.Populate(int(from), int(to-from)); err != nil {
		return false
	}
	return true
}

// listSegments returns the segment start offsets in dir, sorted, removing
// leftover temporary files.
func listSegments(fsys vfs.FS, dir string) ([]int64, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list commitlog %s: %w", dir, err)
	}
	var starts []int64
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				return nil, fmt.Errorf("remove leftover %s: %w", n, err)
			}
			continue
		}
		v, ok := parseSegmentName(n)
		if !ok {
			return nil, fmt.Errorf("commitlog %s: unexpected file %q (segments are named by 20-digit offsets)", dir, n)
		}
		starts = append(starts, v)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	return starts, nil
}
