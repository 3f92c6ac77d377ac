package epoch

import (
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// crashAtFS wraps a CrashFS and simulates a power cut just before its
// crashAt-th mutating operation, which then fails, as does everything after.
type crashAtFS struct {
	*vfs.CrashFS
	mu      sync.Mutex
	n       int
	crashAt int
	crashed bool
}

var errPowerCut = errors.New("power cut")

func (c *crashAtFS) step() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return errPowerCut
	}
	c.n++
	if c.n == c.crashAt {
		c.crashed = true
		c.CrashFS.Crash()
		return errPowerCut
	}
	return nil
}

func (c *crashAtFS) Create(name string) (vfs.File, error) {
	if err := c.step(); err != nil {
		return nil, err
	}
	f, err := c.CrashFS.Create(name)
	if err != nil {
		return nil, err
	}
	return &crashAtFile{File: f, fs: c}, nil
}

func (c *crashAtFS) Rename(o, n string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.CrashFS.Rename(o, n)
}

func (c *crashAtFS) SyncDir(d string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.CrashFS.SyncDir(d)
}

type crashAtFile struct {
	vfs.File
	fs *crashAtFS
}

func (f *crashAtFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *crashAtFile) Sync() error {
	if err := f.fs.step(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *crashAtFile) Close() error {
	if err := f.fs.step(); err != nil {
		_ = f.File.Close()
		return err
	}
	return f.File.Close()
}

// TestCrashSafety cuts the power before every step of each kind of
// mutation (and after it), with torn pages, for several seeds. Reopening
// must give the history before or after the mutation — after it if the
// mutation returned nil — and never an error or anything else.
func TestCrashSafety(t *testing.T) {
	// A history long enough to span several 4 KiB pages, so torn pages
	// matter.
	var before []Entry
	for i := int32(0); i < 600; i++ {
		before = append(before, Entry{i + 1, int64(i) * 1000})
	}
	last := before[len(before)-1]
	mutations := map[string]struct {
		do    func(h *History) error
		after []Entry
	}{
		"append": {func(h *History) error { return h.Append(Entry{last.Epoch + 1, last.StartOffset + 10}) },
			append(append([]Entry(nil), before...), Entry{last.Epoch + 1, last.StartOffset + 10})},
		"truncate suffix": {func(h *History) error { return h.TruncateSuffix(250_500) }, before[:251]},
		"truncate prefix": {func(h *History) error { return h.TruncatePrefix(300_000) }, before[300:]},
		"reset":           {func(h *History) error { return h.Reset([]Entry{{900, 5}}) }, []Entry{{900, 5}}},
	}
	const steps = 6 // create, write, sync, close, rename, syncdir
	for name, m := range mutations {
		for seed := int64(0); seed < 4; seed++ {
			for crashAt := 1; crashAt <= steps+1; crashAt++ {
				cfs := vfs.NewCrashFS(seed)
				if err := cfs.MkdirAll("/store", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := cfs.SyncDir("/"); err != nil {
					t.Fatal(err)
				}
				h, err := Open(cfs, "/store/epochFileCheckpoint")
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Reset(before); err != nil {
					t.Fatal(err)
				}
				w := &crashAtFS{CrashFS: cfs, crashAt: crashAt}
				hw, err := Open(w, "/store/epochFileCheckpoint")
				if err != nil {
					t.Fatal(err)
				}
				merr := m.do(hw)
				if crashAt > steps {
					if merr != nil {
						t.Fatalf("%s: %v", name, merr)
					}
					cfs.Crash()
				} else if merr == nil {
					t.Fatalf("%s: crash at step %d but the mutation returned nil", name, crashAt)
				} else if !reflect.DeepEqual(hw.Entries(), before) {
					t.Fatalf("%s: failed mutation changed the in-memory history", name)
				}
				r, err := Open(cfs, "/store/epochFileCheckpoint")
				if err != nil {
					t.Fatalf("%s seed %d crash at %d: reopen: %v", name, seed, crashAt, err)
				}
				got := r.Entries()
				switch {
				case reflect.DeepEqual(got, m.after):
				case reflect.DeepEqual(got, before):
					if merr == nil {
						t.Fatalf("%s seed %d: mutation returned nil but was lost", name, seed)
					}
				default:
					t.Fatalf("%s seed %d crash at %d: reopened a history of %d entries that is neither before nor after", name, seed, crashAt, len(got))
				}
			}
		}
	}
}
