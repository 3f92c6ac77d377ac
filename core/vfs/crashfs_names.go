package vfs

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

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

// resolve is how every call on an existing name begins: it cleans name,
// fires op's faults (returned as they are) and looks the path up in the
// volatile namespace, failing with a *os.PathError for errOp. It returns
// the inode and the canonical path. c.mu is held.
func (c *CrashFS) resolve(op Op, name, errOp string) (*inode, string, error) {
	p := canon(name)
	if err := c.fault(op, p, name); err != nil {
		return nil, p, err
	}
	n, err := c.lookup(p)
	if err != nil {
		return nil, p, pathErr(errOp, name, err)
	}
	return n, p, nil
}

// resolveParent is resolve for the directory that holds name (see
// lookupParent): it returns that directory (nil for "/"), name's last
// component and the canonical path. c.mu is held.
func (c *CrashFS) resolveParent(op Op, name, errOp string) (d *inode, base, p string, err error) {
	p = canon(name)
	if err := c.fault(op, p, name); err != nil {
		return nil, "", p, err
	}
	d, base, err = c.lookupParent(p)
	if err != nil {
		return nil, "", p, pathErr(errOp, name, err)
	}
	return d, base, p, nil
}

// removeEntry drops d's volatile entry base, which names n. c.mu is held.
func (c *CrashFS) removeEntry(d *inode, base string, n *inode) {
	delete(d.children, base)
	d.modTime = time.Now()
	c.unlink(n)
}

// Create implements FS.
func (c *CrashFS) Create(name string) (File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, base, p, err := c.resolveParent(OpCreate, name, "open")
	if err != nil {
		return nil, err
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
	n, p, err := c.resolve(OpOpen, name, "open")
	if err != nil {
		return nil, err
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
	d, base, _, err := c.resolveParent(OpRemove, name, "remove")
	if err != nil {
		return err
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
	c.removeEntry(d, base, n)
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
	d, base, err := c.lookupParent(p) // a missing parent is success here
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
	c.removeEntry(d, base, n)
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
	n, _, err := c.resolve(OpReadDir, dir, "open")
	if err != nil {
		return nil, err
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
	n, p, err := c.resolve(OpStat, name, "stat")
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(p)), nil
}

// SyncDir implements FS: dir's volatile entries become its durable entries.
func (c *CrashFS) SyncDir(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.SyncDirs++
	n, _, err := c.resolve(OpSyncDir, dir, "sync dir")
	if err != nil {
		return err
	}
	if !n.dir {
		return pathErr("sync dir", dir, syscall.ENOTDIR)
	}
	n.durableChildren = cloneEntries(n.children)
	return nil
}
