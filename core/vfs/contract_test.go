package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// forEachFS runs body against OS (in a fresh temporary directory) and
// against a fresh CrashFS (under /data), so both implementations are held to
// the same contract.
func forEachFS(t *testing.T, body func(t *testing.T, vfs FS, root string)) {
	t.Helper()
	t.Run("OS", func(t *testing.T) { body(t, OS, t.TempDir()) })
	t.Run("CrashFS", func(t *testing.T) {
		c := NewCrashFS(1)
		if err := c.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		body(t, c, "/data")
	})
}

func mustCreate(t *testing.T, vfs FS, name string, contents []byte) File {
	t.Helper()
	f, err := vfs.Create(name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if len(contents) > 0 {
		if n, err := f.WriteAt(contents, 0); err != nil || n != len(contents) {
			t.Fatalf("write %s: n=%d err=%v", name, n, err)
		}
	}
	return f
}

func readAll(t *testing.T, f File) []byte {
	t.Helper()
	size, err := f.Size()
	if err != nil {
		t.Fatalf("size %s: %v", f.Name(), err)
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		t.Fatalf("read %s: n=%d err=%v", f.Name(), n, err)
	}
	return buf[:n]
}

func readFile(t *testing.T, vfs FS, name string) []byte {
	t.Helper()
	f, err := vfs.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	return readAll(t, f)
}

func mustClose(t *testing.T, c io.Closer) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestContractWriteRead(t *testing.T) {
	forEachFS(t, func(t *testing.T, vfs FS, root string) {
		name := filepath.Join(root, "f")
		f := mustCreate(t, vfs, name, []byte("hello"))
		defer mustClose(t, f)
		if f.Name() != name {
			t.Errorf("Name = %q, want %q", f.Name(), name)
		}
		if _, err := f.WriteAt([]byte("world"), 10); err != nil {
			t.Fatal(err)
		}
		want := []byte("hello\x00\x00\x00\x00\x00world")
		if got := readAll(t, f); !bytes.Equal(got, want) {
			t.Fatalf("contents = %q, want %q", got, want)
		}
		buf := make([]byte, 10)
		n, err := f.ReadAt(buf, 10)
		if n != 5 || !errors.Is(err, io.EOF) || string(buf[:n]) != "world" {
			t.Errorf("short ReadAt = %d, %v, %q; want 5, EOF, world", n, err, buf[:n])
		}
		if n, err := f.ReadAt(buf, 100); n != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("ReadAt past EOF = %d, %v; want 0, EOF", n, err)
		}
		if _, err := f.ReadAt(buf, -1); err == nil {
			t.Error("ReadAt at negative offset succeeded")
		}
		if _, err := f.WriteAt(buf, -1); err == nil {
			t.Error("WriteAt at negative offset succeeded")
		}
		if err := f.Sync(); err != nil {
			t.Errorf("Sync: %v", err)
		}
		if err := f.Datasync(); err != nil {
			t.Errorf("Datasync: %v", err)
		}
		if err := vfs.SyncDir(root); err != nil {
			t.Errorf("SyncDir: %v", err)
		}
		if got := readFile(t, vfs, name); !bytes.Equal(got, want) {
			t.Errorf("reopened contents = %q, want %q", got, want)
		}
	})
}

func TestContractOpenModes(t *testing.T) {
	forEachFS(t, func(t *testing.T, vfs FS, root string) {
		name := filepath.Join(root, "f")
		if _, err := vfs.Open(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open missing: %v, want ErrNotExist", err)
		}
		if _, err := vfs.OpenReadWrite(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("OpenReadWrite missing: %v, want ErrNotExist", err)
		}
		if _, err := vfs.Create(filepath.Join(root, "nodir", "f")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Create in missing dir: %v, want ErrNotExist", err)
		}
		mustClose(t, mustCreate(t, vfs, name, []byte("0123456789")))

		ro, err := vfs.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ro.WriteAt([]byte("x"), 0); err == nil {
			t.Error("WriteAt on read-only handle succeeded")
		}
		if _, err := ro.Map(4); err == nil {
			t.Error("Map on read-only handle succeeded")
		}
		mustClose(t, ro)

		rw, err := vfs.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.WriteAt([]byte("ab"), 0); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, rw); string(got) != "ab23456789" {
			t.Errorf("after overwrite: %q", got)
		}
		mustClose(t, rw)

		// Create truncates.
		f := mustCreate(t, vfs, name, nil)
		if size, _ := f.Size(); size != 0 {
			t.Errorf("size after Create of existing file = %d, want 0", size)
		}
		mustClose(t, f)

		// Operations after Close fail with os.ErrClosed.
		if err := f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("second Close: %v, want ErrClosed", err)
		}
		if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, os.ErrClosed) {
			t.Errorf("WriteAt after Close: %v, want ErrClosed", err)
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Errorf("ReadAt after Close: %v, want ErrClosed", err)
		}
	})
}

func TestContractNamespace(t *testing.T) {
	forEachFS(t, func(t *testing.T, vfs FS, root string) {
		j := func(p ...string) string { return filepath.Join(append([]string{root}, p...)...) }
		if err := vfs.MkdirAll(j("a", "b", "c"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.MkdirAll(j("a", "b"), 0o755); err != nil {
			t.Errorf("MkdirAll of existing dir: %v", err)
		}
		for _, n := range []string{"z", "m", "b2"} {
			mustClose(t, mustCreate(t, vfs, j("a", n), []byte(n)))
		}
		if err := vfs.MkdirAll(j("a", "z", "sub"), 0o755); err == nil {
			t.Error("MkdirAll through a file succeeded")
		}
		names, err := vfs.ReadDir(j("a"))
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"b", "b2", "m", "z"}; !slices.Equal(names, want) {
			t.Errorf("ReadDir = %v, want %v", names, want)
		}
		if _, err := vfs.ReadDir(j("missing")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadDir missing: %v", err)
		}

		fi, err := vfs.Stat(j("a", "m"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Name() != "m" || fi.Size() != 1 || fi.IsDir() || !fi.Mode().IsRegular() {
			t.Errorf("Stat file = %q %d dir=%v mode=%v", fi.Name(), fi.Size(), fi.IsDir(), fi.Mode())
		}
		if fi, err := vfs.Stat(j("a", "b")); err != nil || !fi.IsDir() || fi.Name() != "b" {
			t.Errorf("Stat dir = %v, %v", fi, err)
		}
		if _, err := vfs.Stat(j("a", "nope")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat missing: %v", err)
		}

		// Rename replaces the target atomically.
		if err := vfs.Rename(j("a", "m"), j("a", "z")); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, vfs, j("a", "z")); string(got) != "m" {
			t.Errorf("renamed contents = %q, want m", got)
		}
		if _, err := vfs.Stat(j("a", "m")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("old name after rename: %v", err)
		}
		if err := vfs.Rename(j("a", "missing"), j("a", "x")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Rename missing: %v", err)
		}
		// Rename into another directory.
		if err := vfs.Rename(j("a", "z"), j("a", "b", "z")); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, vfs, j("a", "b", "z")); string(got) != "m" {
			t.Errorf("moved contents = %q", got)
		}

		// Remove: files, empty directories, not non-empty ones.
		if err := vfs.Remove(j("a", "b")); err == nil {
			t.Error("Remove of non-empty dir succeeded")
		}
		if err := vfs.Remove(j("a", "b2")); err != nil {
			t.Error(err)
		}
		if err := vfs.Remove(j("a", "b", "c")); err != nil {
			t.Error(err)
		}
		if err := vfs.Remove(j("a", "b2")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Remove missing: %v", err)
		}
		if err := vfs.RemoveAll(j("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := vfs.Stat(j("a")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after RemoveAll: %v", err)
		}
		if err := vfs.RemoveAll(j("a")); err != nil {
			t.Errorf("RemoveAll of missing: %v", err)
		}
		if names, err := vfs.ReadDir(root); err != nil || len(names) != 0 {
			t.Errorf("root after RemoveAll = %v, %v", names, err)
		}
	})
}

func TestContractSizes(t *testing.T) {
	forEachFS(t, func(t *testing.T, vfs FS, root string) {
		f := mustCreate(t, vfs, filepath.Join(root, "f"), bytes.Repeat([]byte{7}, 100))
		defer mustClose(t, f)
		size := func() int64 {
			t.Helper()
			s, err := f.Size()
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		if err := f.Truncate(50); err != nil || size() != 50 {
			t.Fatalf("Truncate(50): %v, size %d", err, size())
		}
		if err := f.Truncate(80); err != nil || size() != 80 {
			t.Fatalf("Truncate(80): %v, size %d", err, size())
		}
		want := append(bytes.Repeat([]byte{7}, 50), make([]byte, 30)...)
		if got := readAll(t, f); !bytes.Equal(got, want) {
			t.Fatalf("after shrink and grow: %v", got)
		}

		if err := f.Allocate(0, 3*PageSize); err != nil {
			t.Fatal(err)
		}
		if size() != 3*PageSize {
			t.Fatalf("size after Allocate = %d", size())
		}
		got := readAll(t, f)
		if !bytes.Equal(got[:80], want) || !bytes.Equal(got[80:], make([]byte, 3*PageSize-80)) {
			t.Fatal("Allocate changed existing data or did not zero-fill")
		}
		if err := f.Allocate(10, 10); err != nil || size() != 3*PageSize {
			t.Fatalf("Allocate inside file: %v, size %d", err, size())
		}
		if err := f.Allocate(-1, 10); err == nil {
			t.Error("Allocate at negative offset succeeded")
		}

		if _, err := f.WriteAt(bytes.Repeat([]byte{9}, 3*PageSize), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.ZeroRange(PageSize, PageSize); err != nil {
			t.Fatal(err)
		}
		if err := f.ZeroRange(3*PageSize-10, 100); err != nil {
			t.Fatal(err)
		}
		if size() != 3*PageSize {
			t.Fatalf("ZeroRange changed the size to %d", size())
		}
		got = readAll(t, f)
		wantZ := bytes.Repeat([]byte{9}, 3*PageSize)
		clear(wantZ[PageSize : 2*PageSize])
		clear(wantZ[3*PageSize-10:])
		if !bytes.Equal(got, wantZ) {
			t.Fatal("ZeroRange zeroed the wrong bytes")
		}
	})
}

func TestContractMap(t *testing.T) {
	forEachFS(t, func(t *testing.T, vfs FS, root string) {
		name := filepath.Join(root, "seg")
		f := mustCreate(t, vfs, name, nil)
		const size = 4 * PageSize
		if err := f.Allocate(0, size); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Map(0); err == nil {
			t.Error("Map(0) succeeded")
		}
		m, err := f.Map(size)
		if err != nil {
			t.Fatal(err)
		}
		b := m.Bytes()
		if len(b) != size {
			t.Fatalf("len(Bytes) = %d", len(b))
		}
		// Store through the mapping, read back through ReadAt.
		copy(b[100:], "mapped store")
		buf := make([]byte, 12)
		if _, err := f.ReadAt(buf, 100); err != nil || string(buf) != "mapped store" {
			t.Errorf("ReadAt after store = %q, %v", buf, err)
		}
		// WriteAt, observed through the mapping.
		if _, err := f.WriteAt([]byte("written"), PageSize+5); err != nil {
			t.Fatal(err)
		}
		if got := string(b[PageSize+5 : PageSize+12]); got != "written" {
			t.Errorf("mapping after WriteAt = %q", got)
		}
		// ZeroRange, observed through the mapping.
		if err := f.ZeroRange(0, PageSize); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b[:PageSize], make([]byte, PageSize)) {
			t.Error("mapping does not observe ZeroRange")
		}
		copy(b[3*PageSize:], "tail")
		if err := f.Datasync(); err != nil {
			t.Fatal(err)
		}
		mustClose(t, m)
		if err := m.Close(); err == nil {
			t.Error("second mapping Close succeeded")
		}
		mustClose(t, f)

		// Another handle sees the mapped stores.
		got := readFile(t, vfs, name)
		if string(got[3*PageSize:3*PageSize+4]) != "tail" || string(got[PageSize+5:PageSize+12]) != "written" {
			t.Error("mapped stores not visible through a new handle")
		}
	})
}

func TestContractDiskUsage(t *testing.T) {
	forEachFS(t, func(t *testing.T, vfs FS, root string) {
		du, err := vfs.DiskUsage(root)
		if err != nil {
			t.Fatal(err)
		}
		if du.Total == 0 || du.Avail > du.Total {
			t.Errorf("DiskUsage = %+v", du)
		}
		if r := du.UsedRatio(); r < 0 || r > 1 {
			t.Errorf("UsedRatio = %v", r)
		}
		if _, err := vfs.DiskUsage(filepath.Join(root, "missing")); err == nil {
			t.Error("DiskUsage of missing path succeeded")
		}
	})
}

func TestUsedRatio(t *testing.T) {
	for _, tc := range []struct {
		du   DiskUsage
		want float64
	}{
		{DiskUsage{}, 0},
		{DiskUsage{Total: 100, Avail: 100}, 0},
		{DiskUsage{Total: 100, Avail: 25}, 0.75},
		{DiskUsage{Total: 100, Avail: 0}, 1},
	} {
		if got := tc.du.UsedRatio(); got != tc.want {
			t.Errorf("%+v.UsedRatio() = %v, want %v", tc.du, got, tc.want)
		}
	}
}
