package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"syscall"
	"time"
)

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
