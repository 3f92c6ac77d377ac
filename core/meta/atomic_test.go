package meta

import (
	"bytes"
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

func TestWriteFileAtomicReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if _, err := ReadFile(vfs.OS, path); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("ReadFile of a missing file: got %v, want ErrNotExist", err)
	}
	for _, content := range [][]byte{[]byte("first"), []byte("second, longer content"), {}, []byte("x")} {
		if err := WriteFileAtomic(vfs.OS, path, content); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(vfs.OS, path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content) {
			t.Fatalf("got %q, want %q", got, content)
		}
		if _, err := os.Stat(path + TempSuffix); !errors.Is(err, iofs.ErrNotExist) {
			t.Fatalf("temp file left behind after a successful write: %v", err)
		}
	}
}

// faultFS fails the failAt-th mutating operation (counting from 1) and
// records the operations it saw.
type faultFS struct {
	vfs.FS
	mu     sync.Mutex
	n      int
	failAt int
	ops    []string
}

var errInjected = errors.New("injected fault")

func (f *faultFS) step(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.ops = append(f.ops, op)
	if f.n == f.failAt {
		return errInjected
	}
	return nil
}

func (f *faultFS) Create(name string) (vfs.File, error) {
	if err := f.step("create"); err != nil {
		return nil, err
	}
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Rename(o, n string) error {
	if err := f.step("rename"); err != nil {
		return err
	}
	return f.FS.Rename(o, n)
}

func (f *faultFS) SyncDir(d string) error {
	if err := f.step("syncdir"); err != nil {
		return err
	}
	return f.FS.SyncDir(d)
}

type faultFile struct {
	vfs.File
	fs *faultFS
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.step("write"); err != nil {
		// A short write: half the data reaches the file.
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.step("sync"); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Close() error {
	if err := f.fs.step("close"); err != nil {
		_ = f.File.Close()
		return err
	}
	return f.File.Close()
}

// TestWriteFileAtomicFaults fails each step of WriteFileAtomic in turn and
// checks that the file then holds exactly the old or exactly the new
// content, and that the error says what failed.
func TestWriteFileAtomicFaults(t *testing.T) {
	oldData := bytes.Repeat([]byte("old-"), 100)
	newData := bytes.Repeat([]byte("NEW!"), 300)

	// Count the steps of a clean write.
	probe := &faultFS{FS: vfs.OS}
	if err := WriteFileAtomic(probe, filepath.Join(t.TempDir(), "p"), newData); err != nil {
		t.Fatal(err)
	}
	want := []string{"create", "write", "sync", "close", "rename", "syncdir"}
	if len(probe.ops) != len(want) {
		t.Fatalf("operations %v, want %v", probe.ops, want)
	}
	for i := range want {
		if probe.ops[i] != want[i] {
			t.Fatalf("operations %v, want %v", probe.ops, want)
		}
	}

	for failAt := 1; failAt <= len(want); failAt++ {
		t.Run(want[failAt-1], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := WriteFileAtomic(vfs.OS, path, oldData); err != nil {
				t.Fatal(err)
			}
			ffs := &faultFS{FS: vfs.OS, failAt: failAt}
			err := WriteFileAtomic(ffs, path, newData)
			if !errors.Is(err, errInjected) {
				t.Fatalf("got %v, want the injected error", err)
			}
			got, rerr := ReadFile(vfs.OS, path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			// Before the rename the old content must remain; from the
			// rename on (the rename itself failed or succeeded) it is new.
			wantData := oldData
			if failAt > 5 {
				wantData = newData
			}
			if !bytes.Equal(got, wantData) {
				t.Fatalf("after a fault at %s the file holds %d bytes %.12q..., want the %s content", want[failAt-1], len(got), got, map[bool]string{true: "new", false: "old"}[failAt > 5])
			}
		})
	}
}
