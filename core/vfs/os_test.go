package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		errno   syscall.Errno
		noSpace bool
		io      bool
	}{
		{syscall.ENOSPC, true, false},
		{syscall.EDQUOT, true, false},
		{syscall.EIO, false, true},
		{syscall.ENOENT, false, false},
	} {
		orig := &os.PathError{Op: "write", Path: "/x", Err: tc.errno}
		err := classify(fmt.Errorf("appending: %w", orig))
		if errors.Is(err, ErrNoSpace) != tc.noSpace || errors.Is(err, ErrIO) != tc.io {
			t.Errorf("%v: Is(ErrNoSpace)=%v Is(ErrIO)=%v", tc.errno, errors.Is(err, ErrNoSpace), errors.Is(err, ErrIO))
		}
		if !errors.Is(err, tc.errno) {
			t.Errorf("%v: original errno lost", tc.errno)
		}
		var pe *os.PathError
		if !errors.As(err, &pe) || pe != orig {
			t.Errorf("%v: *os.PathError lost", tc.errno)
		}
		if want := "appending: " + orig.Error(); err.Error() != want {
			t.Errorf("%v: text %q, want %q", tc.errno, err.Error(), want)
		}
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
	// Classifying twice does not nest.
	once := classify(syscall.ENOSPC)
	if classify(once) != once {
		t.Error("classify is not idempotent")
	}
}

func TestOSErrorsClassified(t *testing.T) {
	// A real errno from the OS implementation keeps errors.Is working.
	_, err := OS.Open(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Open missing: %v", err)
	}
	// /dev/full fails every write with ENOSPC.
	f, err := OS.OpenReadWrite("/dev/full")
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write to /dev/full: %v, want ErrNoSpace and ENOSPC", err)
	}
}

// withFallocate replaces the fallocate the OS implementation uses for the
// duration of the test.
func withFallocate(t *testing.T, fn func(fd int, mode uint32, off, n int64) error) {
	old := fallocate
	fallocate = fn
	t.Cleanup(func() { fallocate = old })
}

// unsupported makes fallocate fail with EOPNOTSUPP for the listed modes.
func unsupported(modes ...uint32) func(fd int, mode uint32, off, n int64) error {
	return func(fd int, mode uint32, off, n int64) error {
		for _, m := range modes {
			if mode == m {
				return syscall.EOPNOTSUPP
			}
		}
		return unix.Fallocate(fd, mode, off, n)
	}
}

func TestOSZeroRangeFallbacks(t *testing.T) {
	const zeroRange = unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE
	const punch = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	for _, tc := range []struct {
		name  string
		modes []uint32 // unsupported
		calls []uint32 // expected fallocate modes, in order
	}{
		{"zero range", nil, []uint32{zeroRange}},
		{"punch hole", []uint32{zeroRange}, []uint32{zeroRange, punch, unix.FALLOC_FL_KEEP_SIZE}},
		{"write zeros", []uint32{zeroRange, punch}, []uint32{zeroRange, punch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []uint32
			inner := unsupported(tc.modes...)
			withFallocate(t, func(fd int, mode uint32, off, n int64) error {
				calls = append(calls, mode)
				return inner(fd, mode, off, n)
			})
			name := filepath.Join(t.TempDir(), "f")
			f := mustCreate(t, OS, name, bytes.Repeat([]byte{5}, 3*PageSize))
			defer f.Close()
			m, err := f.Map(3 * PageSize)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := f.ZeroRange(PageSize, 3*PageSize); err != nil {
				t.Fatal(err)
			}
			want := bytes.Repeat([]byte{5}, 3*PageSize)
			clear(want[PageSize:])
			if got := readAll(t, f); !bytes.Equal(got, want) {
				t.Error("wrong contents after ZeroRange")
			}
			if !bytes.Equal(m.Bytes(), want) {
				t.Error("mapping does not observe ZeroRange")
			}
			if !slices.Equal(calls, tc.calls) {
				t.Errorf("fallocate modes %v, want %v", calls, tc.calls)
			}
		})
	}
}

func TestOSAllocateFallback(t *testing.T) {
	withFallocate(t, unsupported(0))
	name := filepath.Join(t.TempDir(), "f")
	f := mustCreate(t, OS, name, []byte("keep me"))
	defer f.Close()
	if err := f.Allocate(0, 2*PageSize+1); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, f)
	if len(got) != 2*PageSize+1 || string(got[:7]) != "keep me" || !bytes.Equal(got[7:], make([]byte, len(got)-7)) {
		t.Errorf("fallback Allocate: size %d, prefix %q", len(got), got[:7])
	}
	if err := f.Allocate(0, 10); err != nil {
		t.Errorf("fallback Allocate inside file: %v", err)
	}
}

func TestOSAllocateError(t *testing.T) {
	withFallocate(t, func(int, uint32, int64, int64) error { return syscall.ENOSPC })
	f := mustCreate(t, OS, filepath.Join(t.TempDir(), "f"), nil)
	defer f.Close()
	err := f.Allocate(0, PageSize)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Allocate: %v, want ErrNoSpace", err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "fallocate" || pe.Path != f.Name() {
		t.Errorf("Allocate error does not name the operation and file: %v", err)
	}
}

func TestOSDiskUsageMatchesStatfs(t *testing.T) {
	dir := t.TempDir()
	du, err := OS.DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if du.Total != st.Blocks*uint64(st.Bsize) {
		t.Errorf("Total = %d, want %d", du.Total, st.Blocks*uint64(st.Bsize))
	}
	// Avail moves as other processes write; allow 1 GiB of drift.
	want := st.Bavail * uint64(st.Bsize)
	if diff := int64(du.Avail) - int64(want); diff > 1<<30 || diff < -(1<<30) {
		t.Errorf("Avail = %d, statfs says %d", du.Avail, want)
	}
}

func TestOSSyncDirMissing(t *testing.T) {
	err := OS.SyncDir(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir missing: %v", err)
	}
}

// TestOSStartWriteback: the OS file implements the writeback hint, it
// succeeds on written data and changes nothing; after Close it fails.
func TestOSStartWriteback(t *testing.T) {
	f, err := OS.Create(filepath.Join(t.TempDir(), "wb"))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("keel"), 4096)
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	ws, ok := f.(WritebackStarter)
	if !ok {
		t.Fatal("OS files do not implement WritebackStarter")
	}
	if err := ws.StartWriteback(0, int64(len(data))); err != nil {
		t.Fatalf("StartWriteback: %v", err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("contents changed (%v)", err)
	}
	f.Close()
	if err := ws.StartWriteback(0, 1); err == nil {
		t.Fatal("StartWriteback after Close succeeded")
	}
}
