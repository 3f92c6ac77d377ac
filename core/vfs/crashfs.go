package vfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
)

// PageSize is the granularity at which a CrashFS crash tears writes and at
// which Sync compares volatile and durable contents.
const PageSize = 4096

// defaultCapacity is the Total that CrashFS.DiskUsage reports when no
// capacity has been set.
const defaultCapacity = 1 << 40

// maxFileSize bounds CrashFS files (EFBIG beyond), so that a wild offset
// fails cleanly instead of exhausting memory.
const maxFileSize = 1 << 40

// ErrDetached is returned (wrapped in *os.PathError) by every operation on a
// CrashFS File or Mapping that was opened before the latest Crash.
// errors.Is(err, os.ErrClosed) also matches it.
var ErrDetached = fmt.Errorf("vfs: handle opened before a simulated crash: %w", os.ErrClosed)

// errNoSpaceCapacity is what CrashFS returns when its capacity is exhausted:
// it reads like and matches both syscall.ENOSPC and ErrNoSpace.
var errNoSpaceCapacity error = &classifiedError{err: syscall.ENOSPC, kind: ErrNoSpace}

// CrashOptions selects how CrashWith models a power cut.
type CrashOptions struct {
	// TornPages, when set, models dirty pages that reached the disk before
	// the power cut: for every file, each 4 KiB page (PageSize) that lies
	// starts inside both the volatile and the durable size and whose
	// volatile contents differ from its durable contents is independently
	// kept from the volatile side with probability 1/2, chosen by the seeded
	// RNG. The size stays the durable size: a kept page is cut at the
	// durable end of file, and reads as zeros past the volatile end of file
	// (as the page cache's tail of a file's last page does). When clear, a
	// crash keeps exactly the durable state.
	TornPages bool
}

// Stats counts CrashFS activity since NewCrashFS. All fields only grow.
type Stats struct {
	Syncs        int64 // File.Sync calls on regular files, failed ones included
	Datasyncs    int64 // File.Datasync calls, failed ones included
	SyncDirs     int64 // SyncDir calls and Sync calls on directory handles
	SyncedBytes  int64 // bytes of changed pages copied to durable by successful Sync and Datasync
	Writes       int64 // WriteAt calls that wrote at least one byte
	WrittenBytes int64 // bytes written by WriteAt
	Crashes      int64 // Crash and CrashWith calls
	Faults       int64 // injected faults that fired
}

// CrashFS is an in-memory FS that simulates power loss and injects faults.
//
// Every file has volatile contents, which reads, writes and mappings see,
// and durable contents, which are what a crash keeps. Every directory has
// volatile entries, which all name lookups see, and durable entries.
//
//   - WriteAt, Truncate, Allocate, ZeroRange and stores into a Mapping
//     change only volatile contents.
//   - A successful Sync or Datasync copies the file's volatile contents,
//     size included, to its durable contents. The two are identical in
//     CrashFS (Datasync is as strong as Sync).
//   - Create, Remove, RemoveAll, Rename and MkdirAll change only volatile
//     entries. SyncDir(dir) (or Sync on a handle opened on dir) copies dir's
//     volatile entries to its durable entries; it does not make dir's own
//     name durable, that needs SyncDir of dir's parent. A file's durable
//     contents belong to the file, not to its name: a file synced under one
//     name and renamed without SyncDir comes back under the old name with
//     the synced contents.
//   - Crash (see CrashWith) replaces the volatile state by the durable one.
//
// An injected Sync or Datasync failure models Linux's behaviour after a
// writeback error ("fsyncgate"): nothing is made durable, and the pages that
// were dirty at the time are treated as written, so a later successful Sync
// does not make them durable unless they change again.
//
// Paths: relative names are resolved against "/"; all names are cleaned.
// File.Name returns the name as passed to Create or Open.
//
// Space accounting: a file's size counts against the capacity while the
// file has a name, an open handle or a live mapping. Durable contents do not
// count. See SetCapacity.
//
// Concurrency: all methods are safe for concurrent use; they serialise on one
// mutex. Mapped memory is written by callers without locks, as with a real
// shared mapping; Sync may run concurrently with such stores and makes an
// unspecified mix of old and new bytes durable for pages being stored to.
// Crash must not run concurrently with stores into mappings (a power cut
// stops the CPU too); the race detector does not see CrashFS's own accesses
// to file contents, just as it does not see the kernel's accesses to a real
// mapping.
type CrashFS struct {
	mu       sync.Mutex
	rng      *rand.Rand
	gen      uint64 // incremented by every crash; handles remember theirs
	root     *inode
	capacity int64 // 0: unlimited
	used     int64 // sum of the sizes of counted files
	faults   []*Fault
	hook     func(op Op, path string) error
	stats    Stats
}

// NewCrashFS returns an empty CrashFS (only "/" exists, durably) whose torn
// page choices are drawn from a PRNG seeded with seed, so a test that drives
// it deterministically crashes deterministically.
func NewCrashFS(seed int64) *CrashFS {
	root := newDir()
	root.nlink = 1
	return &CrashFS{
		rng:  rand.New(rand.NewPCG(uint64(seed), 0x6b65656c)),
		root: root,
	}
}

var _ FS = (*CrashFS)(nil)

// SetCapacity limits the bytes the files of c may hold to capacity; 0 or
// less removes the limit. WriteAt, Truncate and Allocate that would take the
// total past it fail with an error matching ErrNoSpace (and syscall.ENOSPC)
// and change nothing. Lowering the capacity below what is in use is allowed:
// nothing shrinks, later growth fails. DiskUsage reports Total = capacity and
// Avail = capacity minus the bytes in use (0 when over).
func (c *CrashFS) SetCapacity(capacity int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.capacity = max(capacity, 0)
}

// Stats returns a snapshot of c's counters.
func (c *CrashFS) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// DiskUsage implements FS. path must exist. Total is the capacity (1 TiB
// when none is set); Avail is Total minus the bytes in use, 0 when over.
func (c *CrashFS) DiskUsage(path string) (DiskUsage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.lookup(canon(path)); err != nil {
		return DiskUsage{}, pathErr("statfs", path, err)
	}
	total := int64(defaultCapacity)
	if c.capacity > 0 {
		total = c.capacity
	}
	return DiskUsage{Total: uint64(total), Avail: uint64(max(total-c.used, 0))}, nil
}
