package recovery

import (
	"os"
	"sync"
	"syscall"

	"github.com/keelmq/keel/core/vfs"
)

// gatedFS forwards to a CrashFS until cut: from then on every name
// operation fails with EIO, so a store abandoned at a simulated power cut
// cannot create, rename or remove files in the rebooted filesystem while
// it shuts down. (Its open files and mappings are detached by the crash
// itself.)
type gatedFS struct {
	mu   sync.RWMutex
	dead bool
	fs   *vfs.CrashFS
}

// cut runs the power cut while no name operation is in flight.
func (g *gatedFS) cut(opts vfs.CrashOptions) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dead = true
	g.fs.CrashWith(opts)
}

func (g *gatedFS) do(op, name string, f func() error) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.dead {
		return &os.PathError{Op: op, Path: name, Err: syscall.EIO}
	}
	return f()
}

func (g *gatedFS) Create(name string) (f vfs.File, err error) {
	err = g.do("create", name, func() error { f, err = g.fs.Create(name); return err })
	return f, err
}

func (g *gatedFS) Open(name string) (f vfs.File, err error) {
	err = g.do("open", name, func() error { f, err = g.fs.Open(name); return err })
	return f, err
}

func (g *gatedFS) OpenReadWrite(name string) (f vfs.File, err error) {
	err = g.do("open", name, func() error { f, err = g.fs.OpenReadWrite(name); return err })
	return f, err
}

func (g *gatedFS) Remove(name string) error {
	return g.do("remove", name, func() error { return g.fs.Remove(name) })
}

func (g *gatedFS) RemoveAll(name string) error {
	return g.do("removeall", name, func() error { return g.fs.RemoveAll(name) })
}

func (g *gatedFS) Rename(oldname, newname string) error {
	return g.do("rename", oldname, func() error { return g.fs.Rename(oldname, newname) })
}

func (g *gatedFS) MkdirAll(dir string, perm os.FileMode) error {
	return g.do("mkdir", dir, func() error { return g.fs.MkdirAll(dir, perm) })
}

func (g *gatedFS) ReadDir(dir string) (names []string, err error) {
	err = g.do("readdir", dir, func() error { names, err = g.fs.ReadDir(dir); return err })
	return names, err
}

func (g *gatedFS) Stat(name string) (fi os.FileInfo, err error) {
	err = g.do("stat", name, func() error { fi, err = g.fs.Stat(name); return err })
	return fi, err
}

func (g *gatedFS) SyncDir(dir string) error {
	return g.do("syncdir", dir, func() error { return g.fs.SyncDir(dir) })
}

func (g *gatedFS) DiskUsage(path string) (du vfs.DiskUsage, err error) {
	err = g.do("statfs", path, func() error { du, err = g.fs.DiskUsage(path); return err })
	return du, err
}

var _ vfs.FS = (*gatedFS)(nil)
