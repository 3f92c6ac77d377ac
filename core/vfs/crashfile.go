package vfs

import (
	"io"
	"os"
	"syscall"
	"time"
)

// crashFile is a File of a CrashFS.
type crashFile struct {
	c        *CrashFS
	n        *inode
	name     string // as passed to Create or Open
	path     string // canonical, for fault matching
	gen      uint64 // CrashFS generation it was opened in
	writable bool
	closed   bool // guarded by c.mu
}

var _ File = (*crashFile)(nil)

// check returns the error for an operation on a closed or detached handle.
// c.mu is held.
func (f *crashFile) check(op string) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, os.ErrClosed)
	case f.gen != f.c.gen:
		return pathErr(op, f.name, ErrDetached)
	}
	return nil
}

// checkWrite is check plus the requirement of a writable file handle.
func (f *crashFile) checkWrite(op string) error {
	if err := f.check(op); err != nil {
		return err
	}
	if f.n.dir {
		return pathErr(op, f.name, syscall.EISDIR)
	}
	if !f.writable {
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

// checkFallocate is how Allocate and ZeroRange, both fallocate(2), begin:
// checkWrite, then EINVAL unless off >= 0 and n > 0, then op's faults.
// c.mu is held.
func (f *crashFile) checkFallocate(op Op, off, n int64) error {
	if err := f.checkWrite("fallocate"); err != nil {
		return err
	}
	if off < 0 || n <= 0 {
		return pathErr("fallocate", f.name, syscall.EINVAL)
	}
	return f.c.fault(op, f.path, f.name)
}

func (f *crashFile) Name() string { return f.name }

// ReadAt implements io.ReaderAt over the volatile contents.
func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if err := c.fault(OpRead, f.path, f.name); err != nil {
		return 0, err
	}
	if f.n.dir {
		return 0, pathErr("read", f.name, syscall.EISDIR)
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := rawCopy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt implements io.WriterAt on the volatile contents, growing the file
// as needed.
func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.checkWrite("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("writeat", f.name, syscall.EINVAL)
	}
	var injErr error
	if inj := c.decide(OpWrite, f.path); inj != nil {
		injErr = pathErr("write", f.name, inj.err)
		if inj.short < 0 {
			return 0, injErr
		}
		p = p[:max(min(inj.short, len(p)-1), 0)]
	}
	if len(p) > 0 {
		if end := off + int64(len(p)); end > int64(len(f.n.data)) {
			if err := c.resize(f.n, end); err != nil {
				return 0, pathErr("write", f.name, err)
			}
		}
		rawCopy(f.n.data[off:], p)
		f.n.modTime = time.Now()
		c.stats.Writes++
		c.stats.WrittenBytes += int64(len(p))
	}
	return len(p), injErr
}

// Close releases the handle. Mappings stay valid.
func (f *crashFile) Close() error {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.check("close"); err != nil {
		f.closed = true
		return err
	}
	f.closed = true
	c.account(f.n, func() { f.n.opens-- })
	return nil
}

// Size returns the volatile size (0 for a directory).
func (f *crashFile) Size() (int64, error) {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.check("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

// Sync copies the volatile contents to the durable ones; on a directory
// handle it is SyncDir.
func (f *crashFile) Sync() error {
	if f.n.dir {
		return f.syncDir()
	}
	return f.sync(OpSync, "sync")
}

// Datasync is Sync.
func (f *crashFile) Datasync() error { return f.sync(OpDatasync, "fdatasync") }

func (f *crashFile) sync(op Op, opName string) error {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if op == OpSync {
		c.stats.Syncs++
	} else {
		c.stats.Datasyncs++
	}
	if err := f.check(opName); err != nil {
		return err
	}
	if f.n.dir {
		return pathErr(opName, f.name, syscall.EINVAL)
	}
	if err := c.fault(op, f.path, f.name); err != nil {
		f.n.syncFailed()
		return err
	}
	c.stats.SyncedBytes += f.n.syncData()
	return nil
}

func (f *crashFile) syncDir() error {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.SyncDirs++
	if err := f.check("sync"); err != nil {
		return err
	}
	if err := c.fault(OpSyncDir, f.path, f.name); err != nil {
		return err
	}
	f.n.durableChildren = cloneEntries(f.n.children)
	return nil
}

// Truncate sets the volatile size, zero-filling growth.
func (f *crashFile) Truncate(size int64) error {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.checkWrite("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	if err := c.fault(OpTruncate, f.path, f.name); err != nil {
		return err
	}
	if err := c.resize(f.n, size); err != nil {
		return pathErr("truncate", f.name, err)
	}
	return nil
}

// Allocate grows the volatile size to at least off+n, counting the growth
// against the capacity. Existing contents are untouched.
func (f *crashFile) Allocate(off, n int64) error {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.checkFallocate(OpAllocate, off, n); err != nil {
		return err
	}
	if end := off + n; end > int64(len(f.n.data)) {
		if err := c.resize(f.n, end); err != nil {
			return pathErr("fallocate", f.name, err)
		}
	}
	return nil
}

// ZeroRange zeroes the part of [off, off+n) inside the file.
func (f *crashFile) ZeroRange(off, n int64) error {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.checkFallocate(OpZeroRange, off, n); err != nil {
		return err
	}
	if end := min(off+n, int64(len(f.n.data))); off < end {
		rawClear(f.n.data[off:end])
		f.n.modTime = time.Now()
	}
	return nil
}

// Map returns a Mapping whose Bytes alias the volatile contents [0, size).
// The handle must be writable and size must be in (0, Size()]. While the
// mapping is live, the file cannot grow past the capacity of its current
// backing array (growth fails with errors.ErrUnsupported); shrinking and
// growing back within it keep the mapping coherent, with bytes past the end
// of file reading back as zeros once they are inside the file again.
func (f *crashFile) Map(size int) (Mapping, error) {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.check("mmap"); err != nil {
		return nil, err
	}
	if f.n.dir || !f.writable {
		return nil, pathErr("mmap", f.name, syscall.EACCES)
	}
	if size <= 0 || size > len(f.n.data) {
		return nil, pathErr("mmap", f.name, syscall.EINVAL)
	}
	if err := c.fault(OpMap, f.path, f.name); err != nil {
		return nil, err
	}
	c.account(f.n, func() { f.n.maps++ })
	return &crashMapping{f: f, b: f.n.data[:size:size], gen: f.gen}, nil
}

// crashMapping is a Mapping of a CrashFS file.
type crashMapping struct {
	f      *crashFile
	b      []byte
	gen    uint64
	closed bool // guarded by f.c.mu
}

// Bytes returns the mapped memory; after a crash, detached memory.
func (m *crashMapping) Bytes() []byte { return m.b }

// Close ends the mapping. After a crash it fails with ErrDetached (the
// mapping is released all the same); a second Close fails with os.ErrClosed.
func (m *crashMapping) Close() error {
	c := m.f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case m.closed:
		return pathErr("munmap", m.f.name, os.ErrClosed)
	case m.gen != c.gen:
		m.closed = true
		return pathErr("munmap", m.f.name, ErrDetached)
	}
	m.closed = true
	n := m.f.n
	c.account(n, func() { n.maps-- })
	return nil
}
