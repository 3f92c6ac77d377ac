package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
)

var noTorn = CrashOptions{}

// newCrashDir returns a CrashFS with a durable directory /d.
func newCrashDir(t *testing.T, seed int64) *CrashFS {
	t.Helper()
	c := NewCrashFS(seed)
	if err := c.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return c
}

// durableFile creates name with contents, syncs it and its directory.
func durableFile(t *testing.T, c *CrashFS, name string, contents []byte) File {
	t.Helper()
	f := mustCreate(t, c, name, contents)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	return f
}

func exists(t *testing.T, c *CrashFS, name string) bool {
	t.Helper()
	_, err := c.Stat(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat %s: %v", name, err)
	}
	return err == nil
}

func TestCrashKeepsOnlySyncedData(t *testing.T) {
	for _, sync := range []struct {
		name string
		fn   func(File) error
	}{
		{"Sync", File.Sync},
		{"Datasync", File.Datasync},
	} {
		t.Run(sync.name, func(t *testing.T) {
			c := newCrashDir(t, 1)
			f := mustCreate(t, c, "/d/f", []byte("synced"))
			if err := c.SyncDir("/d"); err != nil {
				t.Fatal(err)
			}
			if err := sync.fn(f); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(" and then some unsynced bytes"), 6); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("S"), 0); err != nil {
				t.Fatal(err)
			}
			c.CrashWith(noTorn)
			if got := readFile(t, c, "/d/f"); string(got) != "synced" {
				t.Errorf("after crash: %q, want %q", got, "synced")
			}
		})
	}
}

func TestCrashUnsyncedFileIsEmpty(t *testing.T) {
	c := newCrashDir(t, 1)
	f := mustCreate(t, c, "/d/f", []byte("never synced"))
	if err := c.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	_ = f
	c.CrashWith(noTorn)
	if got := readFile(t, c, "/d/f"); len(got) != 0 {
		t.Errorf("unsynced file after crash = %q, want empty", got)
	}
}

func TestCrashSyncedSizeChanges(t *testing.T) {
	c := newCrashDir(t, 1)
	f := durableFile(t, c, "/d/f", bytes.Repeat([]byte{1}, 3*PageSize))
	if err := f.Truncate(PageSize + 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Allocate(0, 10*PageSize); err != nil { // not synced
		t.Fatal(err)
	}
	c.CrashWith(noTorn)
	if got := readFile(t, c, "/d/f"); !bytes.Equal(got, bytes.Repeat([]byte{1}, PageSize+1)) {
		t.Errorf("after crash: %d bytes, want the synced %d", len(got), PageSize+1)
	}
}

func TestCrashDirectoryEntries(t *testing.T) {
	c := newCrashDir(t, 1)
	durableFile(t, c, "/d/keep", []byte("k"))
	durableFile(t, c, "/d/old", []byte("o"))
	durableFile(t, c, "/d/gone", []byte("g"))

	// Unsynced: a creation, a rename, a removal, a new directory.
	f := mustCreate(t, c, "/d/new", []byte("n"))
	if err := f.Sync(); err != nil { // data synced, entry not
		t.Fatal(err)
	}
	if err := c.Rename("/d/old", "/d/renamed"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove("/d/gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.MkdirAll("/d/sub/deeper", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir("/d/sub"); err != nil { // deeper is durable in sub, sub is not in d
		t.Fatal(err)
	}

	c.CrashWith(noTorn)
	names, err := c.ReadDir("/d")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gone", "keep", "old"}; !slices.Equal(names, want) {
		t.Fatalf("after crash /d = %v, want %v", names, want)
	}
	if got := readFile(t, c, "/d/gone"); string(got) != "g" {
		t.Errorf("removed file came back as %q", got)
	}

	// The same changes, made durable with SyncDir.
	f = mustCreate(t, c, "/d/new", []byte("n"))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename("/d/old", "/d/renamed"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove("/d/gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	c.CrashWith(noTorn)
	names, _ = c.ReadDir("/d")
	if want := []string{"keep", "new", "renamed"}; !slices.Equal(names, want) {
		t.Fatalf("after synced changes and crash /d = %v, want %v", names, want)
	}
	if got := readFile(t, c, "/d/renamed"); string(got) != "o" {
		t.Errorf("renamed file = %q", got)
	}
}

func TestCrashRenameReplacingSyncedFile(t *testing.T) {
	// The atomic-replace pattern: write tmp, sync, rename over, sync dir.
	c := newCrashDir(t, 1)
	durableFile(t, c, "/d/meta", []byte("v1"))
	tmp := mustCreate(t, c, "/d/meta.tmp", []byte("v2"))
	if err := tmp.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename("/d/meta.tmp", "/d/meta"); err != nil {
		t.Fatal(err)
	}
	c.CrashWith(noTorn) // before SyncDir: the old version
	if got := readFile(t, c, "/d/meta"); string(got) != "v1" {
		t.Fatalf("before SyncDir crash: %q, want v1", got)
	}
	if exists(t, c, "/d/meta.tmp") {
		t.Fatal("meta.tmp exists although its creation was never made durable")
	}

	tmp = mustCreate(t, c, "/d/meta.tmp", []byte("v2"))
	if err := tmp.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename("/d/meta.tmp", "/d/meta"); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	c.CrashWith(noTorn)
	if got := readFile(t, c, "/d/meta"); string(got) != "v2" {
		t.Fatalf("after SyncDir crash: %q, want v2", got)
	}
}

func TestCrashRenameAcrossDirsPartialSync(t *testing.T) {
	c := newCrashDir(t, 1)
	if err := c.MkdirAll("/e", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	durableFile(t, c, "/d/f", []byte("x"))
	if err := c.Rename("/d/f", "/e/f"); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir("/e"); err != nil { // only the new parent
		t.Fatal(err)
	}
	c.CrashWith(noTorn)
	for _, name := range []string{"/d/f", "/e/f"} {
		if got := readFile(t, c, name); string(got) != "x" {
			t.Errorf("%s = %q, want x", name, got)
		}
	}
	// Both names are links to one file: removing one keeps the other.
	if err := c.Remove("/d/f"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, c, "/e/f"); string(got) != "x" {
		t.Errorf("/e/f after removing /d/f = %q", got)
	}
}

func TestCrashTornPages(t *testing.T) {
	const pages = 64
	durable := bytes.Repeat([]byte{'D'}, pages*PageSize)
	run := func(seed int64) (kept []bool) {
		c := newCrashDir(t, seed)
		f := durableFile(t, c, "/d/seg", durable)
		m, err := f.Map(pages * PageSize)
		if err != nil {
			t.Fatal(err)
		}
		b := m.Bytes()
		// Dirty one byte in every page, and the whole of every fourth.
		for p := 0; p < pages; p++ {
			b[p*PageSize+p] = 'V'
			if p%4 == 0 {
				for i := range PageSize {
					b[p*PageSize+i] = 'V'
				}
			}
		}
		// Growth past the durable size is never kept.
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("appended"), pages*PageSize); err != nil {
			t.Fatal(err)
		}
		vol := readAll(t, f)
		c.Crash()
		got := readFile(t, c, "/d/seg")
		if len(got) != pages*PageSize {
			t.Fatalf("size after torn crash = %d, want the durable %d", len(got), pages*PageSize)
		}
		for p := 0; p < pages; p++ {
			page := got[p*PageSize : (p+1)*PageSize]
			switch {
			case bytes.Equal(page, vol[p*PageSize:(p+1)*PageSize]):
				kept = append(kept, true)
			case bytes.Equal(page, durable[p*PageSize:(p+1)*PageSize]):
				kept = append(kept, false)
			default:
				t.Fatalf("seed %d page %d is neither the volatile nor the durable page", seed, p)
			}
		}
		// What a torn crash kept is durable: another crash keeps it.
		c.CrashWith(noTorn)
		if again := readFile(t, c, "/d/seg"); !bytes.Equal(again, got) {
			t.Fatal("pages kept by a torn crash were lost by the next crash")
		}
		return kept
	}
	a := run(7)
	if n := countTrue(a); n == 0 || n == pages {
		t.Errorf("torn crash kept %d of %d dirty pages; want some but not all", n, pages)
	}
	if b := run(7); !slices.Equal(a, b) {
		t.Error("same seed, different torn pages")
	}
	differs := false
	for seed := int64(8); seed < 12 && !differs; seed++ {
		differs = !slices.Equal(a, run(seed))
	}
	if !differs {
		t.Error("different seeds always tear the same pages")
	}
}

func countTrue(bs []bool) (n int) {
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func TestCrashDetachesHandles(t *testing.T) {
	c := newCrashDir(t, 1)
	f := durableFile(t, c, "/d/f", bytes.Repeat([]byte{'a'}, 2*PageSize))
	m, err := f.Map(2 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	old := m.Bytes()
	c.CrashWith(noTorn)

	detached := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrDetached) || !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s after crash: %v, want ErrDetached", what, err)
		}
	}
	_, err = f.WriteAt([]byte("x"), 0)
	detached("WriteAt", err)
	_, err = f.ReadAt(make([]byte, 1), 0)
	detached("ReadAt", err)
	_, err = f.Size()
	detached("Size", err)
	detached("Sync", f.Sync())
	detached("Datasync", f.Datasync())
	detached("Truncate", f.Truncate(0))
	detached("Allocate", f.Allocate(0, 1))
	detached("ZeroRange", f.ZeroRange(0, 1))
	_, err = f.Map(1)
	detached("Map", err)

	// Stores into the old mapping do not reach the new incarnation.
	copy(old, "zzzz")
	g, err := c.OpenReadWrite("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, g); !bytes.Equal(got, bytes.Repeat([]byte{'a'}, 2*PageSize)) {
		t.Errorf("store into a pre-crash mapping changed the file: %q", got[:8])
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	c.CrashWith(noTorn)
	if got := readFile(t, c, "/d/f"); got[0] != 'a' {
		t.Error("store into a pre-crash mapping became durable")
	}
	detached("mapping Close", m.Close())
	detached("File Close", f.Close())
	if err := f.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestCrashFaultNoSpace(t *testing.T) {
	c := newCrashDir(t, 1)
	f := mustCreate(t, c, "/d/f", []byte("abc"))
	c.InjectNoSpace(2)
	if _, err := f.WriteAt([]byte("xyz"), 0); !errors.Is(err, ErrNoSpace) {
		t.Errorf("first WriteAt: %v, want ErrNoSpace", err)
	}
	if err := f.Allocate(0, 1<<20); !errors.Is(err, ErrNoSpace) {
		t.Errorf("Allocate: %v, want ErrNoSpace", err)
	}
	if got := readAll(t, f); string(got) != "abc" {
		t.Errorf("failed operations changed the file: %q", got)
	}
	if _, err := f.WriteAt([]byte("xyz"), 0); err != nil {
		t.Errorf("third call: %v, want success after 2 faults", err)
	}
	if got := c.Stats().Faults; got != 2 {
		t.Errorf("Stats.Faults = %d, want 2", got)
	}
}

func TestCrashFaultShortWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		written int
		p       string
		want    string
	}{
		{"prefix", 3, "abcdef", "abc"},
		{"nothing", 0, "abcdef", ""},
		{"clamped below len", 100, "abcdef", "abcde"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCrashDir(t, 1)
			f := mustCreate(t, c, "/d/f", nil)
			c.InjectShortWrite(1, tc.written, ErrNoSpace)
			n, err := f.WriteAt([]byte(tc.p), 0)
			if n != len(tc.want) || !errors.Is(err, io.ErrShortWrite) || !errors.Is(err, ErrNoSpace) {
				t.Errorf("WriteAt = %d, %v; want %d, short write + ErrNoSpace", n, err, len(tc.want))
			}
			if got := readAll(t, f); string(got) != tc.want {
				t.Errorf("file = %q, want %q", got, tc.want)
			}
			if _, err := f.WriteAt([]byte("ok"), 0); err != nil {
				t.Errorf("fault not used up: %v", err)
			}
		})
	}
}

func TestCrashFaultSyncEIO(t *testing.T) {
	c := newCrashDir(t, 1)
	a := durableFile(t, c, "/d/a", []byte("a1"))
	b := durableFile(t, c, "/d/b", []byte("b1"))
	c.InjectSyncError("/d/a")
	if _, err := a.WriteAt(bytes.Repeat([]byte{'A'}, PageSize), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt([]byte("second page"), PageSize); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); !errors.Is(err, ErrIO) {
		t.Fatalf("Sync of /d/a: %v, want ErrIO", err)
	}
	if err := a.Datasync(); !errors.Is(err, ErrIO) {
		t.Fatalf("Datasync of /d/a: %v, want ErrIO", err)
	}
	if _, err := b.WriteAt([]byte("b2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("Sync of /d/b: %v, want success (prefix does not match)", err)
	}

	// fsyncgate: once the error is gone, Sync reports success, but the
	// pages that were dirty at the failure are not written again; a page
	// changed since is.
	c.ClearFaults()
	if _, err := a.WriteAt([]byte("SECOND"), PageSize); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatalf("Sync after ClearFaults: %v", err)
	}
	c.CrashWith(noTorn)
	got := readFile(t, c, "/d/a")
	if len(got) != PageSize+11 {
		t.Fatalf("size = %d, want %d", len(got), PageSize+11)
	}
	if string(got[:2]) != "a1" || got[2] != 0 {
		t.Errorf("page lost to the failed sync = %q..., want the old durable bytes", got[:4])
	}
	if string(got[PageSize:]) != "SECOND page" {
		t.Errorf("page rewritten after the failure = %q", got[PageSize:])
	}
	if got := readFile(t, c, "/d/b"); string(got) != "b2" {
		t.Errorf("/d/b = %q, want b2", got)
	}
}

func TestCrashFaultHook(t *testing.T) {
	c := newCrashDir(t, 1)
	type call struct {
		op   Op
		path string
	}
	var calls []call
	c.SetFaultHook(func(op Op, path string) error {
		calls = append(calls, call{op, path})
		if op == OpRename {
			return syscall.EROFS
		}
		return nil
	})
	f := mustCreate(t, c, "d/x", []byte("1"))
	err := c.Rename("/d/x", "/d/y")
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("Rename: %v, want the hook's EROFS", err)
	}
	if !exists(t, c, "/d/x") || exists(t, c, "/d/y") {
		t.Error("failed rename took effect")
	}
	mustClose(t, f)
	want := []call{{OpCreate, "/d/x"}, {OpWrite, "/d/x"}, {OpRename, "/d/x"}, {OpStat, "/d/x"}, {OpStat, "/d/y"}}
	if !slices.Equal(calls, want) {
		t.Errorf("hook calls = %v, want %v", calls, want)
	}
	c.ClearFaults()
	if err := c.Rename("/d/x", "/d/y"); err != nil {
		t.Errorf("Rename after ClearFaults: %v", err)
	}
}

func TestCrashFaultRules(t *testing.T) {
	c := newCrashDir(t, 1)
	c.InjectFault(Fault{Ops: OpCreate | OpMkdir, PathPrefix: "/d/locked", Count: 0, Err: syscall.EACCES})
	for range 3 {
		if _, err := c.Create("/d/locked1"); !errors.Is(err, syscall.EACCES) {
			t.Errorf("Create under prefix: %v", err)
		}
	}
	if err := c.MkdirAll("/d/locked/x", 0o755); !errors.Is(err, syscall.EACCES) {
		t.Errorf("MkdirAll under prefix: %v", err)
	}
	if f, err := c.Create("/d/open"); err != nil {
		t.Errorf("Create outside prefix: %v", err)
	} else {
		mustClose(t, f)
	}
	c.InjectFault(Fault{Ops: OpRead, Count: 1}) // Err nil: ErrIO
	f, err := c.Open("/d/open")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrIO) {
		t.Errorf("ReadAt: %v, want ErrIO", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, io.EOF) {
		t.Errorf("second ReadAt: %v, want EOF (fault used up)", err)
	}
}

func TestOpString(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{OpWrite, "write"},
		{OpSync | OpDatasync, "sync|datasync"},
		{0, "none"},
		{OpMap | 1<<20, "map|Op(0x100000)"},
	} {
		if got := tc.op.String(); got != tc.want {
			t.Errorf("%#x.String() = %q, want %q", uint32(tc.op), got, tc.want)
		}
	}
}

func TestCrashCapacity(t *testing.T) {
	c := newCrashDir(t, 1)
	c.SetCapacity(10000)
	usage := func() DiskUsage {
		t.Helper()
		du, err := c.DiskUsage("/")
		if err != nil {
			t.Fatal(err)
		}
		return du
	}
	f := mustCreate(t, c, "/d/f", make([]byte, 8000))
	if du := usage(); du.Total != 10000 || du.Avail != 2000 {
		t.Errorf("DiskUsage = %+v, want 10000/2000", du)
	}
	if err := f.Allocate(0, 12000); !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Allocate past capacity: %v", err)
	}
	if _, err := f.WriteAt(make([]byte, 3000), 8000); !errors.Is(err, ErrNoSpace) {
		t.Errorf("WriteAt past capacity: %v", err)
	}
	if err := f.Truncate(10001); !errors.Is(err, ErrNoSpace) {
		t.Errorf("Truncate past capacity: %v", err)
	}
	if size, _ := f.Size(); size != 8000 {
		t.Errorf("failed growth changed the size to %d", size)
	}
	if err := f.Allocate(0, 10000); err != nil {
		t.Errorf("Allocate up to capacity: %v", err)
	}
	g := mustCreate(t, c, "/d/g", nil)
	if _, err := g.WriteAt([]byte{1}, 0); !errors.Is(err, ErrNoSpace) {
		t.Errorf("write to full fs: %v", err)
	}
	// An unlinked but open file still takes space until closed.
	if err := c.Remove("/d/f"); err != nil {
		t.Fatal(err)
	}
	if du := usage(); du.Avail != 0 {
		t.Errorf("Avail with unlinked open file = %d, want 0", du.Avail)
	}
	mustClose(t, f)
	if du := usage(); du.Avail != 10000 {
		t.Errorf("Avail after close = %d, want 10000", du.Avail)
	}
	if _, err := g.WriteAt(make([]byte, 5000), 0); err != nil {
		t.Errorf("write after space freed: %v", err)
	}
	// Removing a directory tree frees its files.
	if err := c.RemoveAll("/d"); err != nil {
		t.Fatal(err)
	}
	mustClose(t, g)
	if du := usage(); du.Avail != 10000 {
		t.Errorf("Avail after RemoveAll = %d, want 10000", du.Avail)
	}
	c.SetCapacity(0)
	if du := usage(); du.Total != defaultCapacity {
		t.Errorf("Total without capacity = %d", du.Total)
	}
}

func TestCrashCapacityAfterCrash(t *testing.T) {
	c := newCrashDir(t, 1)
	c.SetCapacity(100000)
	durableFile(t, c, "/d/a", make([]byte, 1000))
	f := mustCreate(t, c, "/d/b", make([]byte, 5000)) // entry not durable
	_ = f
	c.CrashWith(noTorn)
	du, err := c.DiskUsage("/")
	if err != nil {
		t.Fatal(err)
	}
	if du.Avail != 99000 {
		t.Errorf("Avail after crash = %d, want 99000 (only /d/a survives)", du.Avail)
	}
}

func TestCrashStats(t *testing.T) {
	c := newCrashDir(t, 1)
	f := mustCreate(t, c, "/d/f", make([]byte, 4*PageSize))
	before := c.Stats()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	// Zeros over a new file's zero-filled durable image change nothing.
	if s := c.Stats(); s.Syncs != before.Syncs+1 || s.SyncedBytes != before.SyncedBytes {
		t.Errorf("after first sync: %+v", s)
	}
	if _, err := f.WriteAt([]byte{1}, PageSize+3); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1}, 3*PageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if s.Datasyncs != before.Datasyncs+1 || s.SyncedBytes != before.SyncedBytes+2*PageSize {
		t.Errorf("after datasync of 2 dirty pages: %+v (before %+v)", s, before)
	}
	if s.Writes != before.Writes+2 || s.WrittenBytes != before.WrittenBytes+2 {
		t.Errorf("write counters: %+v (before %+v)", s, before)
	}
	if err := c.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	d, err := c.Open("/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	c.Crash()
	s = c.Stats()
	if s.SyncDirs != before.SyncDirs+2 || s.Crashes != 1 {
		t.Errorf("SyncDirs/Crashes: %+v", s)
	}
}

func TestCrashDirHandleSync(t *testing.T) {
	c := newCrashDir(t, 1)
	durableFile(t, c, "/d/f", []byte("x"))
	if err := c.Rename("/d/f", "/d/g"); err != nil {
		t.Fatal(err)
	}
	d, err := c.Open("/d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadAt(make([]byte, 1), 0); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("ReadAt on dir: %v", err)
	}
	if err := d.Datasync(); err == nil {
		t.Error("Datasync on dir handle succeeded")
	}
	if _, err := c.OpenReadWrite("/d"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("OpenReadWrite dir: %v", err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	c.CrashWith(noTorn)
	if !exists(t, c, "/d/g") || exists(t, c, "/d/f") {
		t.Error("Sync on a directory handle did not make the rename durable")
	}
}

func TestCrashDurableContents(t *testing.T) {
	c := newCrashDir(t, 1)
	f := mustCreate(t, c, "/d/f", []byte("v1"))
	if _, err := c.DurableContents("/d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DurableContents before SyncDir: %v", err)
	}
	if err := c.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.DurableContents("/d/f"); err != nil || len(got) != 0 {
		t.Errorf("DurableContents before Sync = %q, %v", got, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	if got, err := c.DurableContents("/d/f"); err != nil || string(got) != "v1" {
		t.Errorf("DurableContents = %q, %v; want v1", got, err)
	}
	if _, err := c.DurableContents("/d"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("DurableContents of dir: %v", err)
	}
}

func TestCrashMappedResize(t *testing.T) {
	c := newCrashDir(t, 1)
	f := mustCreate(t, c, "/d/f", nil)
	if err := f.Truncate(2 * PageSize); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(2 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	for i := range b {
		b[i] = 0xff
	}
	// Growing past the backing array would detach the mapping: refused.
	if err := f.Allocate(0, 1<<20); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("growing a mapped file: %v, want ErrUnsupported", err)
	}
	// Shrinking and growing back keeps the mapping coherent; the bytes
	// that were outside the file come back as zeros.
	if err := f.Truncate(PageSize); err != nil {
		t.Fatal(err)
	}
	b[PageSize+1] = 0xee // beyond EOF: discarded
	if err := f.Truncate(2 * PageSize); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, f)
	if !bytes.Equal(got[PageSize:], make([]byte, PageSize)) || got[0] != 0xff {
		t.Error("regrown region is not zero or the kept region changed")
	}
	b[PageSize+2] = 0x11
	if got := readAll(t, f); got[PageSize+2] != 0x11 {
		t.Error("mapping not coherent after shrink and regrow")
	}
	mustClose(t, m)
	if err := f.Allocate(0, 1<<20); err != nil {
		t.Errorf("growing after unmap: %v", err)
	}
	if got := readAll(t, f); got[PageSize+2] != 0x11 || len(got) != 1<<20 {
		t.Error("growth after unmap lost data")
	}
}

func TestCrashMapErrors(t *testing.T) {
	c := newCrashDir(t, 1)
	f := mustCreate(t, c, "/d/f", make([]byte, 100))
	if _, err := f.Map(101); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Map past EOF: %v, want EINVAL", err)
	}
}

func TestCrashPaths(t *testing.T) {
	c := NewCrashFS(1)
	mustClose(t, mustCreate(t, c, "rel", []byte("r")))
	if got := readFile(t, c, "/rel"); string(got) != "r" {
		t.Errorf("relative name not resolved against /: %q", got)
	}
	if got := readFile(t, c, "//x/../rel"); string(got) != "r" {
		t.Errorf("unclean name: %q", got)
	}
	if err := c.Remove("/"); err == nil {
		t.Error("Remove(/) succeeded")
	}
	if err := c.RemoveAll("/"); err == nil {
		t.Error("RemoveAll(/) succeeded")
	}
	if _, err := c.Create("/"); err == nil {
		t.Error("Create(/) succeeded")
	}
	if err := c.MkdirAll("/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename("/a", "/a/b/c"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("rename dir below itself: %v", err)
	}
	if err := c.Rename("/rel", "/a"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("rename file over dir: %v", err)
	}
	if err := c.Rename("/a", "/rel"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("rename dir over file: %v", err)
	}
	if err := c.MkdirAll("/e", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename("/e", "/a"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Errorf("rename dir over non-empty dir: %v", err)
	}
	if err := c.Rename("/a/b", "/e"); err != nil {
		t.Errorf("rename dir over empty dir: %v", err)
	}
	if err := c.Rename("/rel", "/rel"); err != nil {
		t.Errorf("rename onto itself: %v", err)
	}
	if _, err := c.Create("/rel/x"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("create below a file: %v", err)
	}
}

// TestCrashConcurrent runs mapped stores concurrently with Datasync, and
// file operations from several goroutines; with -race it checks that
// CrashFS's own accesses are not reported and its locking is sound.
func TestCrashConcurrent(t *testing.T) {
	c := newCrashDir(t, 1)
	f := durableFile(t, c, "/d/seg", nil)
	const size = 64 * PageSize
	if err := f.Allocate(0, size); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(size)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	var wg sync.WaitGroup
	flushed := make(chan struct{})
	wg.Add(1)
	go func() { // writer: keeps storing until the flusher is done
		defer wg.Done()
		for pass := 0; ; pass++ {
			for i := range size {
				b[i] = byte(i%251) + byte(pass)
			}
			select {
			case <-flushed:
				for i := range size {
					b[i] = byte(i%251) + 1
				}
				return
			default:
			}
		}
	}()
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "/d/g" + string(rune('0'+g))
			for i := range 50 {
				h, err := c.Create(name)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := h.WriteAt([]byte{byte(i)}, int64(i)); err != nil {
					t.Error(err)
				}
				if _, err := c.ReadDir("/d"); err != nil {
					t.Error(err)
				}
				if err := h.Sync(); err != nil {
					t.Error(err)
				}
				h.Close()
			}
		}()
	}
	// The flusher runs on the test goroutine, concurrently with the stores.
	for range 50 {
		if err := f.Datasync(); err != nil {
			t.Error(err)
			break
		}
		if _, err := f.ReadAt(make([]byte, 100), 1000); err != nil {
			t.Error(err)
			break
		}
	}
	close(flushed)
	wg.Wait()
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, m)
	c.CrashWith(noTorn)
	got := readFile(t, c, "/d/seg")
	for i := range size {
		if got[i] != byte(i%251)+1 {
			t.Fatalf("byte %d = %d after final datasync and crash", i, got[i])
		}
	}
}
