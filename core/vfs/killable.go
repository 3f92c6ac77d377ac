package vfs

import (
	"fmt"
	"os"
	"sync"
)

// Killable wraps an FS so that a test can end one "process incarnation"
// atomically before simulating a power cut: after Kill returns, every
// FS-level call made through this wrapper fails with ErrDetached, and every
// call that started before Kill has finished. Without it, goroutines of a
// store that is being abandoned could still create, rename or remove files
// in the post-crash state of a shared CrashFS, which no real crashed process
// can do. Files opened through it are the underlying FS's files (CrashFS
// detaches them at Crash).
//
// Use one Killable per incarnation:
//
//	k := vfs.NewKillable(crashFS)
//	store := open(k)
//	... load ...
//	k.Kill()
//	crashFS.Crash()
//	store2 := open(vfs.NewKillable(crashFS))
type Killable struct {
	fs   FS
	mu   sync.RWMutex
	dead bool
}

var _ FS = (*Killable)(nil)

// NewKillable wraps fs.
func NewKillable(fs FS) *Killable { return &Killable{fs: fs} }

// Kill makes every later call fail and waits for calls in flight.
func (k *Killable) Kill() {
	k.mu.Lock()
	k.dead = true
	k.mu.Unlock()
}

func (k *Killable) enter(op, name string) error {
	k.mu.RLock()
	if k.dead {
		k.mu.RUnlock()
		return &os.PathError{Op: op, Path: name, Err: fmt.Errorf("process killed: %w", ErrDetached)}
	}
	return nil
}

func (k *Killable) leave() { k.mu.RUnlock() }

// Create implements FS.
func (k *Killable) Create(name string) (File, error) {
	if err := k.enter("create", name); err != nil {
		return nil, err
	}
	defer k.leave()
	f, err := k.fs.Create(name)
	return k.wrap(f, err)
}

// Open implements FS.
func (k *Killable) Open(name string) (File, error) {
	if err := k.enter("open", name); err != nil {
		return nil, err
	}
	defer k.leave()
	f, err := k.fs.Open(name)
	return k.wrap(f, err)
}

// OpenReadWrite implements FS.
func (k *Killable) OpenReadWrite(name string) (File, error) {
	if err := k.enter("open", name); err != nil {
		return nil, err
	}
	defer k.leave()
	f, err := k.fs.OpenReadWrite(name)
	return k.wrap(f, err)
}

// Remove implements FS.
func (k *Killable) Remove(name string) error {
	if err := k.enter("remove", name); err != nil {
		return err
	}
	defer k.leave()
	return k.fs.Remove(name)
}

// RemoveAll implements FS.
func (k *Killable) RemoveAll(name string) error {
	if err := k.enter("removeall", name); err != nil {
		return err
	}
	defer k.leave()
	return k.fs.RemoveAll(name)
}

// Rename implements FS.
func (k *Killable) Rename(oldname, newname string) error {
	if err := k.enter("rename", oldname); err != nil {
		return err
	}
	defer k.leave()
	return k.fs.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (k *Killable) MkdirAll(dir string, perm os.FileMode) error {
	if err := k.enter("mkdir", dir); err != nil {
		return err
	}
	defer k.leave()
	return k.fs.MkdirAll(dir, perm)
}

// ReadDir implements FS.
func (k *Killable) ReadDir(dir string) ([]string, error) {
	if err := k.enter("readdir", dir); err != nil {
		return nil, err
	}
	defer k.leave()
	return k.fs.ReadDir(dir)
}

// Stat implements FS.
func (k *Killable) Stat(name string) (os.FileInfo, error) {
	if err := k.enter("stat", name); err != nil {
		return nil, err
	}
	defer k.leave()
	return k.fs.Stat(name)
}

// SyncDir implements FS.
func (k *Killable) SyncDir(dir string) error {
	if err := k.enter("syncdir", dir); err != nil {
		return err
	}
	defer k.leave()
	return k.fs.SyncDir(dir)
}

// DiskUsage implements FS.
func (k *Killable) DiskUsage(path string) (DiskUsage, error) {
	if err := k.enter("statfs", path); err != nil {
		return DiskUsage{}, err
	}
	defer k.leave()
	return k.fs.DiskUsage(path)
}

// wrap returns files whose mutating calls also stop at Kill, so a write
// or sync racing with the kill either happens before it or fails.
func (k *Killable) wrap(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &killableFile{File: f, k: k}, nil
}

type killableFile struct {
	File
	k *Killable
}

func (f *killableFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.k.enter("write", f.Name()); err != nil {
		return 0, err
	}
	defer f.k.leave()
	return f.File.WriteAt(p, off)
}

func (f *killableFile) Sync() error {
	if err := f.k.enter("sync", f.Name()); err != nil {
		return err
	}
	defer f.k.leave()
	return f.File.Sync()
}

func (f *killableFile) Datasync() error {
	if err := f.k.enter("datasync", f.Name()); err != nil {
		return err
	}
	defer f.k.leave()
	return f.File.Datasync()
}

func (f *killableFile) Truncate(size int64) error {
	if err := f.k.enter("truncate", f.Name()); err != nil {
		return err
	}
	defer f.k.leave()
	return f.File.Truncate(size)
}

func (f *killableFile) Allocate(off, n int64) error {
	if err := f.k.enter("allocate", f.Name()); err != nil {
		return err
	}
	defer f.k.leave()
	return f.File.Allocate(off, n)
}

func (f *killableFile) ZeroRange(off, n int64) error {
	if err := f.k.enter("zerorange", f.Name()); err != nil {
		return err
	}
	defer f.k.leave()
	return f.File.ZeroRange(off, n)
}
