package vfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// OS is the operating system's filesystem, through package os and
// golang.org/x/sys/unix (Linux).
//
// Every error it returns keeps the original error (usually an *os.PathError
// carrying the errno, so errors.Is(err, syscall.ENOSPC) and
// errors.Is(err, fs.ErrNotExist) work) and, in addition, matches ErrNoSpace
// for ENOSPC and EDQUOT and ErrIO for EIO.
//
// File specifics:
//   - Sync is fsync(2); Datasync is fdatasync(2).
//   - Allocate is fallocate(fd, 0, off, n). Only when the filesystem answers
//     EOPNOTSUPP does it fall back to writing zeros, and then only beyond the
//     current end of file (existing data is never overwritten; holes inside
//     the file stay unreserved).
//   - ZeroRange is fallocate(FALLOC_FL_ZERO_RANGE|FALLOC_FL_KEEP_SIZE); if the
//     filesystem does not support it, FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE
//     followed by fallocate(FALLOC_FL_KEEP_SIZE) of the same range; if that is
//     not supported either, writing zeros over the part of the range inside
//     the file.
//   - Map is mmap(2) with PROT_READ|PROT_WRITE and MAP_SHARED; stores reach
//     the page cache at once and are made durable by Sync or Datasync on any
//     File of the same file (fsync flushes the file's dirty pages whatever
//     dirtied them).
//   - SyncDir opens the directory read-only and fsyncs it.
//   - DiskUsage is statfs(2): Total = Blocks*Bsize, Avail = Bavail*Bsize.
var OS FS = osFS{}

// fallocate is unix.Fallocate; tests replace it to exercise the fallbacks.
var fallocate = unix.Fallocate

type osFS struct{}

// classifiedError keeps the original error (its text and its chain) and adds
// one of the package's sentinel errors to what errors.Is matches.
type classifiedError struct {
	err  error
	kind error
}

func (e *classifiedError) Error() string   { return e.err.Error() }
func (e *classifiedError) Unwrap() []error { return []error{e.err, e.kind} }

// classify wraps err so that errors.Is matches ErrNoSpace for ENOSPC and
// EDQUOT and ErrIO for EIO. Other errors, and nil, are returned unchanged.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		if errors.Is(err, ErrNoSpace) {
			return err
		}
		return &classifiedError{err: err, kind: ErrNoSpace}
	case errors.Is(err, syscall.EIO):
		if errors.Is(err, ErrIO) {
			return err
		}
		return &classifiedError{err: err, kind: ErrIO}
	}
	return err
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, classify(err)
	}
	return &osFile{f: f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, classify(err)
	}
	return &osFile{f: f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, classify(err)
	}
	return &osFile{f: f}, nil
}

func (osFS) Remove(name string) error { return classify(os.Remove(name)) }

func (osFS) RemoveAll(name string) error { return classify(os.RemoveAll(name)) }

func (osFS) Rename(oldname, newname string) error {
	return classify(os.Rename(oldname, newname))
}

func (osFS) MkdirAll(dir string, perm os.FileMode) error {
	return classify(os.MkdirAll(dir, perm))
}

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, classify(err)
	}
	names := make([]string, len(entries)) // os.ReadDir sorts by name
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Stat(name string) (os.FileInfo, error) {
	fi, err := os.Stat(name)
	return fi, classify(err)
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return classify(fmt.Errorf("sync dir: %w", err))
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return classify(fmt.Errorf("sync dir: %w", serr))
	}
	return classify(cerr)
}

func (osFS) DiskUsage(path string) (DiskUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return DiskUsage{}, classify(&os.PathError{Op: "statfs", Path: path, Err: err})
	}
	bsize := uint64(st.Bsize)
	return DiskUsage{Total: st.Blocks * bsize, Avail: st.Bavail * bsize, Free: st.Bfree * bsize}, nil
}

// osFile is an *os.File plus the Linux-specific operations.
type osFile struct {
	f *os.File
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.f.ReadAt(p, off)
	return n, classify(err)
}

func (o *osFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := o.f.WriteAt(p, off)
	return n, classify(err)
}

func (o *osFile) Close() error { return classify(o.f.Close()) }

func (o *osFile) Name() string { return o.f.Name() }

func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, classify(err)
	}
	return fi.Size(), nil
}

func (o *osFile) Sync() error { return classify(o.f.Sync()) }

func (o *osFile) Datasync() error {
	return o.control("fdatasync", func(fd int) error { return unix.Fdatasync(fd) })
}

// StartWriteback implements WritebackStarter.
func (o *osFile) StartWriteback(off, n int64) error {
	return o.control("sync_file_range", func(fd int) error { return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE) })
}

func (o *osFile) Truncate(size int64) error { return classify(o.f.Truncate(size)) }

func (o *osFile) Allocate(off, n int64) error {
	if off < 0 || n <= 0 {
		return &os.PathError{Op: "fallocate", Path: o.f.Name(), Err: syscall.EINVAL}
	}
	err := o.control("fallocate", func(fd int) error { return fallocate(fd, 0, off, n) })
	if !errors.Is(err, syscall.EOPNOTSUPP) {
		return err
	}
	// No fallocate on this filesystem: extend with explicit zeros, leaving
	// any data already in the file alone.
	size, serr := o.Size()
	if serr != nil {
		return serr
	}
	if start := max(off, size); start < off+n {
		if werr := o.writeZeros(start, off+n); werr != nil {
			return fmt.Errorf("allocate %s by writing zeros: %w", o.f.Name(), werr)
		}
	}
	return nil
}

func (o *osFile) ZeroRange(off, n int64) error {
	if off < 0 || n <= 0 {
		return &os.PathError{Op: "fallocate", Path: o.f.Name(), Err: syscall.EINVAL}
	}
	err := o.control("fallocate", func(fd int) error {
		return fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	})
	if !errors.Is(err, syscall.EOPNOTSUPP) {
		return err
	}
	err = o.control("fallocate", func(fd int) error {
		return fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	})
	if err == nil {
		return o.control("fallocate", func(fd int) error {
			return fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, off, n)
		})
	}
	if !errors.Is(err, syscall.EOPNOTSUPP) {
		return err
	}
	size, serr := o.Size()
	if serr != nil {
		return serr
	}
	if end := min(off+n, size); off < end {
		if werr := o.writeZeros(off, end); werr != nil {
			return fmt.Errorf("zero range of %s by writing zeros: %w", o.f.Name(), werr)
		}
	}
	return nil
}

// writeZeros writes zeros over [from, to).
func (o *osFile) writeZeros(from, to int64) error {
	zeros := make([]byte, min(to-from, 1<<20))
	for from < to {
		n := min(to-from, int64(len(zeros)))
		if _, err := o.WriteAt(zeros[:n], from); err != nil {
			return err
		}
		from += n
	}
	return nil
}

func (o *osFile) Map(size int) (Mapping, error) {
	if size <= 0 {
		return nil, &os.PathError{Op: "mmap", Path: o.f.Name(), Err: syscall.EINVAL}
	}
	var b []byte
	err := o.control("mmap", func(fd int) error {
		var err error
		b, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &osMapping{b: b, name: o.f.Name()}, nil
}

// control runs fn on the file's descriptor and wraps its error as
// *os.PathError{Op: op}, classified.
func (o *osFile) control(op string, fn func(fd int) error) error {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return classify(&os.PathError{Op: op, Path: o.f.Name(), Err: err})
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return classify(&os.PathError{Op: op, Path: o.f.Name(), Err: err})
	}
	if ferr != nil {
		return classify(&os.PathError{Op: op, Path: o.f.Name(), Err: ferr})
	}
	return nil
}

type osMapping struct {
	b    []byte
	name string
}

func (m *osMapping) Bytes() []byte { return m.b }

func (m *osMapping) Close() error {
	if m.b == nil {
		return &os.PathError{Op: "munmap", Path: m.name, Err: os.ErrClosed}
	}
	err := unix.Munmap(m.b)
	m.b = nil
	if err != nil {
		return classify(&os.PathError{Op: "munmap", Path: m.name, Err: err})
	}
	return nil
}

// Populate implements Populator: MADV_POPULATE_WRITE (Linux 5.14+)
// prefaults the range writable in one call, so the writer does not take a
// page fault per page. Older kernels answer EINVAL; callers treat any error
// as "not supported" and stop asking.
func (m *osMapping) Populate(off, n int) error {
	if m.b == nil || off < 0 || n <= 0 || off+n > len(m.b) {
		return &os.PathError{Op: "madvise", Path: m.name, Err: os.ErrInvalid}
	}
	page := os.Getpagesize()
	start := off &^ (page - 1)
	if err := unix.Madvise(m.b[start:off+n], unix.MADV_POPULATE_WRITE); err != nil {
		return &os.PathError{Op: "madvise", Path: m.name, Err: err}
	}
	return nil
}
