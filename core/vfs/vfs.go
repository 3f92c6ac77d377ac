// Package vfs is keel's filesystem seam. Every file operation the core makes
// goes through an FS, so the same code runs on the operating system's
// filesystem (OS) and on a crash-simulating in-memory one (NewCrashFS) in
// which only synced data survives a simulated power cut and faults (ENOSPC,
// EIO, short writes) can be injected.
//
// # Durability model
//
// The contract every implementation keeps, and every caller may rely on:
//
//   - Data written with WriteAt, or stored into a Mapping, is volatile until
//     a later Sync or Datasync on the same file returns nil. After that it
//     survives a power cut.
//   - Size changes (Truncate, Allocate) are durable after Sync; Datasync also
//     makes them durable when they are needed to read the synced data back
//     (fdatasync semantics).
//   - The existence of a name (Create, Rename, Remove) is durable only after
//     SyncDir on its parent directory returns nil.
//   - A failed Sync or Datasync (EIO) means nothing about what is durable;
//     callers must treat the store as failed for writes (as PostgreSQL's
//     fsyncgate lesson teaches, retrying a failed fsync may report success
//     while data is lost).
//
// Implementations are safe for concurrent use by multiple goroutines, with
// the usual file caveat: concurrent writes to overlapping ranges race.
//
// # Errors
//
// Both implementations report errors the way package os does: an
// *os.PathError (an *os.LinkError for Rename) around a syscall.Errno, so
// errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOSPC) and the
// like work alike on both. In addition errors.Is(err, ErrNoSpace) matches
// a full device (ENOSPC, EDQUOT) and errors.Is(err, ErrIO) matches EIO,
// whether real or injected.
//
// # Files
//
//	vfs.go            the FS, File and Mapping contracts
//	os.go             the operating system's filesystem
//	crashfs.go        CrashFS: the type, its options, counters and capacity
//	crashfs_names.go  CrashFS's namespace: lookups and the calls on names
//	crashfs_inode.go  CrashFS's files and directories: sizes, space, durable copies
//	crashfs_crash.go  the simulated power cut (Crash, CrashWith, DurableContents)
//	crashfile.go      CrashFS's File and Mapping
//	raw*.go           CrashFS's copies of file contents, unseen by the race detector
//	fault.go          injected faults (InjectFault, the fault hook)
//	killable.go       an FS that can be cut off at once (a killed process)
package vfs

import (
	"errors"
	"io"
	"os"
)

// ErrNoSpace is returned (possibly wrapped) when the device is full. Callers
// check it with errors.Is; the OS implementation maps ENOSPC and EDQUOT to it.
var ErrNoSpace = errors.New("no space left on device")

// ErrIO is returned (possibly wrapped) for an injected or real EIO.
var ErrIO = errors.New("input/output error")

// FS is a filesystem. Paths use the host's separator; implementations accept
// absolute or relative paths and clean them (CrashFS resolves relative paths
// against "/").
type FS interface {
	// Create creates name (truncating an existing file) for reading and
	// writing.
	Create(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything below it. It is not an error if
	// name does not exist.
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists the names (not paths) in dir, sorted.
	ReadDir(dir string) ([]string, error)
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the creation, removal and renaming of entries in dir
	// durable.
	SyncDir(dir string) error
	// DiskUsage reports the total and available bytes of the filesystem
	// holding path.
	DiskUsage(path string) (DiskUsage, error)
}

// DiskUsage is the capacity of a filesystem.
type DiskUsage struct {
	Total uint64 // bytes in the filesystem
	Avail uint64 // bytes available to an unprivileged writer
	// Free is the bytes not in use, including blocks reserved for root
	// (statfs f_bfree). Zero means "same as Avail".
	Free uint64
}

// UsedRatio is the used fraction of the space an unprivileged writer can
// use, in [0,1]: used / (used + avail), as df's Use% computes it. Blocks
// reserved for root (or hidden by the platform) count neither as used nor
// as available, so a filesystem with a large reserve is not reported full
// while it still has room.
func (d DiskUsage) UsedRatio() float64 {
	free := d.Free
	if free == 0 || free < d.Avail {
		free = d.Avail
	}
	if d.Total == 0 || free > d.Total {
		return 0
	}
	used := d.Total - free
	if used+d.Avail == 0 {
		return 0
	}
	return float64(used) / float64(used+d.Avail)
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name is the path the file was opened with.
	Name() string
	// Size is the file's current (volatile) size.
	Size() (int64, error)
	// Sync is fsync: data and metadata become durable.
	Sync() error
	// Datasync is fdatasync: data, and the metadata needed to read it back,
	// become durable.
	Datasync() error
	// Truncate sets the file's size.
	Truncate(size int64) error
	// Allocate reserves [off, off+n) so later writes there cannot fail for
	// lack of space (fallocate without KEEP_SIZE: the size grows to off+n,
	// never shrinks, and existing data is kept). It fails with ErrNoSpace
	// when the space is not there, and with EINVAL unless off >= 0 and
	// n > 0.
	Allocate(off, n int64) error
	// ZeroRange makes [off, off+n) read as zeros without changing the size
	// and keeps the space allocated. Mappings observe the zeros. The part of
	// the range past the end of file is ignored. off >= 0 and n > 0.
	ZeroRange(off, n int64) error
	// Map maps [0, size) of the file shared and read-write. The File must
	// have been opened for writing, size must be > 0 and the file must
	// already be at least size bytes long (CrashFS enforces this with
	// EINVAL; on OS, touching mapped pages past the end of file raises
	// SIGBUS). Stores into the mapping are volatile writes to the file (see
	// the package durability model) and are made durable by Sync or
	// Datasync on this File. The mapping outlives Close of the File. Do not
	// resize a mapped file except with ZeroRange (CrashFS refuses growth
	// that would move the mapped memory).
	Map(size int) (Mapping, error)
}

// Mapping is a shared memory mapping of a file.
type Mapping interface {
	// Bytes returns the mapped memory, len(Bytes()) == size. It must not be
	// used after Close.
	Bytes() []byte
	// Close unmaps the memory. It does not sync.
	Close() error
}

// WritebackStarter is an optional interface of Files: StartWriteback asks
// the kernel to begin writing [off, off+n) back to the device now, without
// waiting (sync_file_range with SYNC_FILE_RANGE_WRITE), so that a later
// Datasync has less left to do. It is only a hint: it makes nothing
// durable and changes no contents; errors mean "not done" and may be
// ignored.
type WritebackStarter interface {
	StartWriteback(off, n int64) error
}

// Populator is an optional interface of Mappings: Populate prefaults
// [off, off+n) for writing, so stores into it do not fault page by page.
// It changes no contents. Implementations may return an error meaning
// "not supported"; callers then simply stop calling it.
type Populator interface {
	Populate(off, n int) error
}
