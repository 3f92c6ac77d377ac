package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
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

// inode is a file or a directory of a CrashFS. It survives renames; names
// point to it from directory entry maps.
type inode struct {
	dir bool

	// Directories.
	children        map[string]*inode // volatile entries
	durableChildren map[string]*inode // entries as of the last SyncDir

	// Files. data's backing array is what mappings alias: while maps > 0
	// it is never replaced (growth past cap(data) fails), and after a
	// shrink the bytes past len(data) are zeroed before they become part of
	// the file again.
	data    []byte // volatile contents, len(data) is the size
	durable []byte // durable contents, len(durable) is the durable size
	shadow  []byte // non-nil after a failed sync: what the "kernel" believes is on disk
	nlink   int    // volatile names
	opens   int    // open handles of the current generation
	maps    int    // live mappings of the current generation
	modTime time.Time
}

func newDir() *inode {
	return &inode{
		dir:             true,
		children:        map[string]*inode{},
		durableChildren: map[string]*inode{},
		modTime:         time.Now(),
	}
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

// canon returns the absolute, cleaned form of name.
func canon(name string) string { return filepath.Clean("/" + name) }

// components splits a canonical path into its names ("/" has none).
func components(p string) []string {
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

// lookup resolves a canonical path in the volatile namespace.
func (c *CrashFS) lookup(p string) (*inode, error) {
	n := c.root
	for _, part := range components(p) {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		child, ok := n.children[part]
		if !ok {
			return nil, syscall.ENOENT
		}
		n = child
	}
	return n, nil
}

// lookupParent resolves the directory that holds canonical path p and
// returns it with p's last name ("" for "/").
func (c *CrashFS) lookupParent(p string) (*inode, string, error) {
	if p == "/" {
		return nil, "", nil
	}
	dir, base := filepath.Split(p)
	d, err := c.lookup(canon(dir))
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", syscall.ENOTDIR
	}
	return d, base, nil
}

// counted reports whether n's size counts against the capacity.
func (n *inode) counted() bool {
	return !n.dir && (n.nlink > 0 || n.opens > 0 || n.maps > 0)
}

// account runs change, which may alter n's link, open or map counts, and
// keeps c.used in step.
func (c *CrashFS) account(n *inode, change func()) {
	before := n.counted()
	change()
	switch after := n.counted(); {
	case before && !after:
		c.used -= int64(len(n.data))
	case !before && after:
		c.used += int64(len(n.data))
	}
}

// unlink drops one volatile name of n; for a directory, recursively every
// name below it (as RemoveAll does).
func (c *CrashFS) unlink(n *inode) {
	if n.dir {
		for _, child := range n.children {
			c.unlink(child)
		}
		n.children = map[string]*inode{}
	}
	c.account(n, func() { n.nlink-- })
}

// resize sets n's volatile size, zero-filling growth. It fails with
// errNoSpaceCapacity past the capacity and with an ErrUnsupported error when
// growth would have to move the contents of a mapped file.
func (c *CrashFS) resize(n *inode, size int64) error {
	old := int64(len(n.data))
	switch {
	case size == old:
		return nil
	case size > maxFileSize:
		return syscall.EFBIG
	case size < old:
		n.data = n.data[:size]
	default:
		if c.capacity > 0 && n.counted() && c.used+size-old > c.capacity {
			return errNoSpaceCapacity
		}
		if size > int64(cap(n.data)) {
			if n.maps > 0 {
				return fmt.Errorf("crashfs cannot grow a mapped file past %d bytes: %w",
					cap(n.data), errors.ErrUnsupported)
			}
			newCap := max(size, 2*int64(cap(n.data)))
			nd := make([]byte, size, newCap)
			rawCopy(nd, n.data)
			n.data = nd
		} else {
			n.data = n.data[:size]
			rawClear(n.data[old:])
		}
	}
	if n.counted() {
		c.used += size - old
	}
	n.modTime = time.Now()
	return nil
}

// syncData copies n's changed pages to its durable contents and returns how
// many bytes it copied.
func (n *inode) syncData() int64 {
	vol := n.data
	n.durable = resizeZero(n.durable, len(vol))
	base := n.durable
	if n.shadow != nil {
		n.shadow = resizeZero(n.shadow, len(vol))
		base = n.shadow
	}
	var copied int64
	for p := 0; p < len(vol); p += PageSize {
		e := min(p+PageSize, len(vol))
		if rawEqual(vol[p:e], base[p:e]) {
			continue
		}
		rawCopy(n.durable[p:e], vol[p:e])
		if n.shadow != nil {
			copy(n.shadow[p:e], n.durable[p:e])
		}
		copied += int64(e - p)
	}
	return copied
}

// syncFailed records an injected writeback error: the pages dirty now are
// considered written although they are not durable.
func (n *inode) syncFailed() {
	n.shadow = resizeZero(n.shadow, len(n.data))
	rawCopy(n.shadow, n.data)
}

// resizeZero returns b resized to n bytes, keeping its prefix and zeroing
// any growth. b is never aliased by a mapping.
func resizeZero(b []byte, n int) []byte {
	if n <= len(b) {
		return b[:n]
	}
	if n <= cap(b) {
		old := len(b)
		b = b[:n]
		clear(b[old:])
		return b
	}
	nb := make([]byte, n)
	copy(nb, b)
	return nb
}

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

// Crash is CrashWith(CrashOptions{TornPages: true}): a power cut in which
// some unsynced pages reached the disk.
func (c *CrashFS) Crash() { c.CrashWith(CrashOptions{TornPages: true}) }

// CrashWith simulates a power cut followed by a reboot, in place. Afterwards:
//
//   - Every directory's entries are its durable entries (as of its last
//     SyncDir; a directory never synced is empty). Files and directories
//     reachable from "/" through durable entries exist; nothing else does.
//   - Every surviving file's contents and size are its durable contents
//     (as of its last successful Sync or Datasync; a file never synced is
//     empty), except that with opts.TornPages some pages hold the volatile
//     contents instead (see CrashOptions). Whatever was kept is now both
//     volatile and durable.
//   - Every File and Mapping obtained before the crash is detached: its
//     operations fail with an error matching ErrDetached and os.ErrClosed.
//     An old Mapping's Bytes still returns addressable memory, but it is no
//     longer the file's: stores into it change nothing.
//   - Injected faults, the fault hook, the capacity and the counters stay.
//
// Its cost is proportional to the total size of the surviving files.
// CrashWith must not run concurrently with stores into mappings.
func (c *CrashFS) CrashWith(opts CrashOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.stats.Crashes++

	// Rebuild the namespace from durable entries and count links.
	seen := map[*inode]bool{c.root: true}
	var files []*inode
	var walk func(d *inode)
	walk = func(d *inode) {
		d.children = cloneEntries(d.durableChildren)
		for _, child := range slices.Sorted(maps.Keys(d.children)) {
			n := d.children[child]
			if seen[n] {
				n.nlink++
				continue
			}
			seen[n] = true
			n.nlink, n.opens, n.maps = 1, 0, 0
			if n.dir {
				walk(n)
			} else {
				files = append(files, n)
			}
		}
	}
	walk(c.root)

	// Replace file contents; sorted walk order keeps torn choices
	// reproducible for a given seed.
	c.used = 0
	for _, n := range files {
		old := n.data
		vol := make([]byte, len(n.durable))
		copy(vol, n.durable)
		if opts.TornPages {
			c.tear(vol, old)
			copy(n.durable, vol)
		}
		n.data = vol
		n.shadow = nil
		c.used += int64(len(vol))
	}
}

// tear overwrites some pages of dur, the durable image, with the matching
// pages of vol, the volatile image (see CrashOptions.TornPages). Past the
// volatile end of file a volatile page reads as zeros, as the page cache's
// tail of the last page does.
func (c *CrashFS) tear(dur, vol []byte) {
	var page [PageSize]byte
	for p := 0; p < len(dur) && p < len(vol); p += PageSize {
		e := min(p+PageSize, len(dur))
		v := page[:e-p]
		clear(v)
		rawCopy(v, vol[p:min(e, len(vol))])
		if !bytes.Equal(v, dur[p:e]) && c.rng.IntN(2) == 1 {
			copy(dur[p:e], v)
		}
	}
}

// DurableContents returns a copy of what a crash without torn pages would
// leave in the file name: name is resolved through durable directory
// entries, and the contents are the file's durable contents. It fails with
// an *os.PathError (fs.ErrNotExist) when name would not survive.
func (c *CrashFS) DurableContents(name string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.root
	for _, part := range components(canon(name)) {
		child, ok := n.durableChildren[part]
		if !n.dir || !ok {
			return nil, pathErr("durable", name, syscall.ENOENT)
		}
		n = child
	}
	if n.dir {
		return nil, pathErr("durable", name, syscall.EISDIR)
	}
	return slices.Clone(n.durable), nil
}

// Create implements FS.
func (c *CrashFS) Create(name string) (File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := canon(name)
	if err := c.fault(OpCreate, p, name); err != nil {
		return nil, err
	}
	d, base, err := c.lookupParent(p)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if d == nil {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	n, ok := d.children[base]
	switch {
	case ok && n.dir:
		return nil, pathErr("open", name, syscall.EISDIR)
	case ok:
		if err := c.resize(n, 0); err != nil {
			return nil, pathErr("open", name, err)
		}
	default:
		n = &inode{nlink: 1, modTime: time.Now()}
		d.children[base] = n
		d.modTime = time.Now()
	}
	return c.newHandle(n, name, p, true), nil
}

// Open implements FS. Directories may be opened; such a handle supports
// Sync (which is SyncDir), Size (0), Name and Close.
func (c *CrashFS) Open(name string) (File, error) { return c.open(name, false) }

// OpenReadWrite implements FS.
func (c *CrashFS) OpenReadWrite(name string) (File, error) { return c.open(name, true) }

func (c *CrashFS) open(name string, writable bool) (File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := canon(name)
	if err := c.fault(OpOpen, p, name); err != nil {
		return nil, err
	}
	n, err := c.lookup(p)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if n.dir && writable {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return c.newHandle(n, name, p, writable), nil
}

func (c *CrashFS) newHandle(n *inode, name, p string, writable bool) *crashFile {
	c.account(n, func() { n.opens++ })
	return &crashFile{c: c, n: n, name: name, path: p, gen: c.gen, writable: writable}
}

// Remove implements FS.
func (c *CrashFS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := canon(name)
	if err := c.fault(OpRemove, p, name); err != nil {
		return err
	}
	d, base, err := c.lookupParent(p)
	if err != nil {
		return pathErr("remove", name, err)
	}
	if d == nil {
		return pathErr("remove", name, syscall.EBUSY)
	}
	n, ok := d.children[base]
	if !ok {
		return pathErr("remove", name, syscall.ENOENT)
	}
	if n.dir && len(n.children) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(d.children, base)
	d.modTime = time.Now()
	c.unlink(n)
	return nil
}

// RemoveAll implements FS. Removing "/" is refused with EBUSY.
func (c *CrashFS) RemoveAll(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := canon(name)
	if err := c.fault(OpRemove, p, name); err != nil {
		return err
	}
	d, base, err := c.lookupParent(p)
	if err == syscall.ENOENT {
		return nil
	}
	if err != nil {
		return pathErr("unlinkat", name, err)
	}
	if d == nil {
		return pathErr("unlinkat", name, syscall.EBUSY)
	}
	n, ok := d.children[base]
	if !ok {
		return nil
	}
	delete(d.children, base)
	d.modTime = time.Now()
	c.unlink(n)
	return nil
}

// Rename implements FS with rename(2)'s rules: a file may replace a file, a
// directory may replace an empty directory, and a directory cannot move
// below itself. The change is volatile until SyncDir of both parents; if
// only the new parent is synced, a crash can leave the file under both
// names.
func (c *CrashFS) Rename(oldname, newname string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	op, np := canon(oldname), canon(newname)
	if err := c.fault(OpRename, op, oldname); err != nil {
		return err
	}
	fail := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	od, obase, err := c.lookupParent(op)
	if err != nil {
		return fail(err)
	}
	nd, nbase, err := c.lookupParent(np)
	if err != nil {
		return fail(err)
	}
	if od == nil || nd == nil {
		return fail(syscall.EBUSY)
	}
	src, ok := od.children[obase]
	if !ok {
		return fail(syscall.ENOENT)
	}
	if op == np {
		return nil
	}
	if src.dir && strings.HasPrefix(np, op+"/") {
		return fail(syscall.EINVAL)
	}
	dst, exists := nd.children[nbase]
	if exists {
		switch {
		case dst == src:
			return nil
		case dst.dir && !src.dir:
			return fail(syscall.EISDIR)
		case !dst.dir && src.dir:
			return fail(syscall.ENOTDIR)
		case dst.dir && len(dst.children) > 0:
			return fail(syscall.ENOTEMPTY)
		}
	}
	delete(od.children, obase)
	nd.children[nbase] = src
	if exists {
		c.unlink(dst)
	}
	od.modTime, nd.modTime = time.Now(), time.Now()
	return nil
}

// MkdirAll implements FS. perm is ignored.
func (c *CrashFS) MkdirAll(dir string, perm os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := canon(dir)
	if err := c.fault(OpMkdir, p, dir); err != nil {
		return err
	}
	n := c.root
	for _, part := range components(p) {
		child, ok := n.children[part]
		if !ok {
			child = newDir()
			child.nlink = 1
			n.children[part] = child
			n.modTime = time.Now()
		} else if !child.dir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = child
	}
	return nil
}

// ReadDir implements FS.
func (c *CrashFS) ReadDir(dir string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := canon(dir)
	if err := c.fault(OpReadDir, p, dir); err != nil {
		return nil, err
	}
	n, err := c.lookup(p)
	if err != nil {
		return nil, pathErr("open", dir, err)
	}
	if !n.dir {
		return nil, pathErr("readdirent", dir, syscall.ENOTDIR)
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// Stat implements FS. The FileInfo's Sys is nil.
func (c *CrashFS) Stat(name string) (os.FileInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := canon(name)
	if err := c.fault(OpStat, p, name); err != nil {
		return nil, err
	}
	n, err := c.lookup(p)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return n.info(filepath.Base(p)), nil
}

// SyncDir implements FS: dir's volatile entries become its durable entries.
func (c *CrashFS) SyncDir(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := canon(dir)
	c.stats.SyncDirs++
	if err := c.fault(OpSyncDir, p, dir); err != nil {
		return err
	}
	n, err := c.lookup(p)
	if err != nil {
		return pathErr("sync dir", dir, err)
	}
	if !n.dir {
		return pathErr("sync dir", dir, syscall.ENOTDIR)
	}
	n.durableChildren = cloneEntries(n.children)
	return nil
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

// info describes n under name.
func (n *inode) info(name string) os.FileInfo {
	return &fileInfo{name: name, size: int64(len(n.data)), dir: n.dir, mod: n.modTime}
}

type fileInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) ModTime() time.Time { return fi.mod }
func (fi *fileInfo) IsDir() bool        { return fi.dir }
func (fi *fileInfo) Sys() any           { return nil }
func (fi *fileInfo) Mode() fs.FileMode {
	if fi.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// cloneEntries copies a directory's entry map (never returning nil).
func cloneEntries(m map[string]*inode) map[string]*inode {
	out := make(map[string]*inode, len(m))
	maps.Copy(out, m)
	return out
}
