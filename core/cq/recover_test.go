package cq

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// writeUnit writes e at queue offset qo directly into the queue's files (the
// file must exist).
func writeUnit(t *testing.T, fsys vfs.FS, dir string, qo int64, e Entry) {
	t.Helper()
	start := qo - qo%testEPF
	f, err := fsys.OpenReadWrite(filepath.Join(dir, fileName(start)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [EntrySize]byte
	encodeEntry(b[:], e)
	if _, err := f.WriteAt(b[:], (qo-start)*EntrySize); err != nil {
		t.Fatal(err)
	}
}

func createRaw(t *testing.T, fsys vfs.FS, dir string, start int64, size int64) {
	t.Helper()
	f, err := fsys.Create(filepath.Join(dir, fileName(start)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if size > 0 {
		if err := f.Allocate(0, size); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecoverTail(t *testing.T) {
	full := int64(testEPF * EntrySize)
	for _, tc := range []struct {
		name      string
		first, n  int64 // entries [first, n) written by Put before corruption
		corrupt   func(t *testing.T, dir string)
		wantMax   int64 // 0 with wantEmpty
		wantEmpty bool
		wantFiles int
	}{
		{
			name: "clean", first: 0, n: 12,
			corrupt: func(*testing.T, string) {}, wantMax: 12, wantFiles: 2,
		},
		{
			name: "size zero entry after the end", first: 0, n: 12,
			corrupt: func(t *testing.T, dir string) {
				writeUnit(t, vfs.OS, dir, 12, Entry{Offset: ent(12).Offset, Size: 0, TagsCode: 7})
				writeUnit(t, vfs.OS, dir, 13, ent(13))
			},
			wantMax: 12, wantFiles: 2,
		},
		{
			name: "hole then valid-looking entries", first: 0, n: 12,
			corrupt: func(t *testing.T, dir string) {
				writeUnit(t, vfs.OS, dir, 13, ent(13))
				writeUnit(t, vfs.OS, dir, 14, ent(14))
			},
			wantMax: 12, wantFiles: 2,
		},
		{
			name: "negative offset", first: 0, n: 12,
			corrupt: func(t *testing.T, dir string) {
				writeUnit(t, vfs.OS, dir, 12, Entry{Offset: -5, Size: 10})
			},
			wantMax: 12, wantFiles: 2,
		},
		{
			name: "offset going backwards (torn high bytes)", first: 0, n: 12,
			corrupt: func(t *testing.T, dir string) {
				writeUnit(t, vfs.OS, dir, 12, Entry{Offset: 3, Size: 100})
			},
			wantMax: 12, wantFiles: 2,
		},
		{
			name: "entry overwritten in the middle", first: 0, n: 12,
			corrupt: func(t *testing.T, dir string) {
				writeUnit(t, vfs.OS, dir, 10, Entry{Offset: 0, Size: 0})
			},
			wantMax: 10, wantFiles: 2,
		},
		{
			name: "blank after a real entry", first: 0, n: 12,
			corrupt: func(t *testing.T, dir string) {
				writeUnit(t, vfs.OS, dir, 12, blankEntry)
			},
			wantMax: 12, wantFiles: 2,
		},
		{
			name: "garbage file after a full last file", first: 0, n: 16,
			corrupt: func(t *testing.T, dir string) {
				createRaw(t, vfs.OS, dir, 16, full)
				writeUnit(t, vfs.OS, dir, 16, Entry{Offset: 1, Size: -1})
			},
			wantMax: 16, wantFiles: 2,
		},
		{
			name: "zero-length last file", first: 0, n: 12,
			corrupt: func(t *testing.T, dir string) {
				createRaw(t, vfs.OS, dir, 16, 0)
			},
			wantMax: 12, wantFiles: 2,
		},
		{
			name: "empty next file at a boundary", first: 0, n: 16,
			corrupt: func(t *testing.T, dir string) {
				createRaw(t, vfs.OS, dir, 16, full)
			},
			wantMax: 16, wantFiles: 2,
		},
		{
			name: "short last file keeps its entries", first: 0, n: 11,
			corrupt: func(t *testing.T, dir string) {
				f, err := vfs.OS.OpenReadWrite(filepath.Join(dir, fileName(8)))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := f.Truncate(3*EntrySize + 7); err != nil {
					t.Fatal(err)
				}
			},
			wantMax: 11, wantFiles: 2,
		},
		{
			name: "short earlier file is cut even outside the last three", first: 0, n: 40,
			corrupt: func(t *testing.T, dir string) {
				f, err := vfs.OS.OpenReadWrite(filepath.Join(dir, fileName(8)))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := f.Truncate(5 * EntrySize); err != nil {
					t.Fatal(err)
				}
			},
			wantMax: 13, wantFiles: 2,
		},
		{
			name: "only blanks survive", first: 5, n: 6,
			corrupt: func(t *testing.T, dir string) {
				writeUnit(t, vfs.OS, dir, 5, Entry{})
			},
			wantEmpty: true,
		},
		{
			name: "first entry invalid", first: 0, n: 3,
			corrupt: func(t *testing.T, dir string) {
				writeUnit(t, vfs.OS, dir, 0, Entry{Offset: 9, Size: 0})
			},
			wantEmpty: true,
		},
		{
			name: "unexpected names are ignored", first: 0, n: 3,
			corrupt: func(t *testing.T, dir string) {
				for _, n := range []string{"notes.txt", "00000000000000000007", "0000000000000000016"} {
					f, err := vfs.OS.Create(filepath.Join(dir, n))
					if err != nil {
						t.Fatal(err)
					}
					f.Close()
				}
			},
			wantMax: 3, wantFiles: 4, // the three strays stay
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			q := openTest(t, vfs.OS, root)
			putRange(t, q, tc.first, tc.n)
			dir := q.Dir()
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			tc.corrupt(t, dir)
			q = openTest(t, vfs.OS, root)
			defer q.Close()
			if tc.wantEmpty {
				checkState(t, q, 0, 0, 0)
				if names, _ := vfs.OS.ReadDir(dir); len(names) != 0 {
					t.Errorf("files left: %v", names)
				}
				return
			}
			checkState(t, q, tc.first, tc.wantMax, ent(tc.wantMax-1).End())
			checkEntries(t, q, tc.first, stream(tc.first, tc.wantMax))
			if names := listFiles(t, vfs.OS, dir); len(names) != tc.wantFiles {
				t.Errorf("files %v, want %d", names, tc.wantFiles)
			}
			// Everything past the end reads as zeros now.
			fl := *q.files.Load()
			last := fl[len(fl)-1]
			if off := (tc.wantMax - last.start) * EntrySize; !allZero(last.b[off:]) {
				t.Errorf("bytes past the recovered end are not zero")
			}
			// Dispatch continues where recovery stopped.
			putRange(t, q, tc.wantMax, tc.wantMax+10)
			checkEntries(t, q, tc.first, stream(tc.first, tc.wantMax+10))
		})
	}
}

func TestOpenCorrupt(t *testing.T) {
	full := int64(testEPF * EntrySize)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"file larger than configured", func(t *testing.T, dir string) {
			createRaw(t, vfs.OS, dir, 0, full+EntrySize)
		}},
		{"files not contiguous", func(t *testing.T, dir string) {
			createRaw(t, vfs.OS, dir, 0, full)
			createRaw(t, vfs.OS, dir, 16, full)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "TopicA", "3")
			if err := vfs.OS.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			_, err := OpenQueue(testOpts(vfs.OS), root, "TopicA", 3)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenQueue = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestCrash puts entries, flushes some, crashes the CrashFS (with torn
// pages) and checks that recovery keeps every flushed entry, keeps only a
// prefix of the rest, and that truncation to the flushed point plus
// re-dispatch restores the exact stream.
func TestCrash(t *testing.T) {
	for seed := int64(0); seed < 60; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			cfs := vfs.NewCrashFS(seed)
			opts := testOpts(cfs)
			opts.EntriesPerFile = 512 // several 4 KiB pages per file, entries straddle pages
			epf := int64(opts.EntriesPerFile)
			q, err := OpenQueue(opts, "/store/cq", "T", 1)
			if err != nil {
				t.Fatal(err)
			}
			first := int64(0)
			if rng.IntN(3) == 0 {
				first = rng.Int64N(3 * epf)
			}
			flushedN := first + rng.Int64N(2*epf)
			total := flushedN + rng.Int64N(2*epf)
			rounds := rng.IntN(2) // sometimes flush and write again before the final flush point
			for i := first; i < flushedN; i++ {
				mustPut(t, q, i, ent(i))
				if rounds == 1 && i == (first+flushedN)/2 {
					if err := q.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			didFlush := flushedN > first
			if didFlush {
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			for i := flushedN; i < total; i++ {
				mustPut(t, q, i, ent(i))
			}
			cfs.Crash()

			q2, err := OpenQueue(opts, "/store/cq", "T", 1)
			if err != nil {
				t.Fatalf("reopen after crash: %v", err)
			}
			defer q2.Close()
			if !didFlush {
				// Nothing was ever durable: at most torn pages of a file
				// whose name was never synced. Anything recovered must be a
				// prefix of the stream.
				if q2.Max() != 0 {
					checkPrefix(t, q2, first, total)
				}
				return
			}
			if q2.Max() < flushedN {
				t.Fatalf("Max() = %d after crash, flushed up to %d", q2.Max(), flushedN)
			}
			if q2.Min() != first {
				t.Fatalf("Min() = %d, want %d", q2.Min(), first)
			}
			checkPrefix(t, q2, first, total)
			// Store recovery: truncate to the re-dispatch point, re-dispatch.
			if err := q2.TruncatePhys(ent(flushedN).Offset); err != nil {
				t.Fatal(err)
			}
			if q2.Max() != flushedN {
				t.Fatalf("Max() = %d after truncate, want %d", q2.Max(), flushedN)
			}
			checkEntries(t, q2, first, stream(first, flushedN))
			putRange(t, q2, flushedN, total+5)
			checkEntries(t, q2, first, stream(first, total+5))
		})
	}
}

// checkPrefix checks that q holds a prefix of stream [first, total): every
// entry exact, except that the last may differ in its tags code (a page
// boundary inside the tags code of an unflushed entry).
func checkPrefix(t *testing.T, q *Queue, first, total int64) {
	t.Helper()
	if q.Max() > total {
		t.Fatalf("Max() = %d beyond what was written (%d)", q.Max(), total)
	}
	got, err := q.Get(q.Min(), int(total), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		qo := q.Min() + int64(i)
		want := ent(qo)
		if e == want {
			continue
		}
		if qo == q.Max()-1 && e.Offset == want.Offset && e.Size == want.Size {
			continue
		}
		t.Fatalf("entry %d = %+v, want %+v (Min %d, Max %d)", qo, e, want, q.Min(), q.Max())
	}
	if q.MaxPhysOffset() != ent(q.Max()-1).End() {
		t.Fatalf("MaxPhysOffset %d, want %d", q.MaxPhysOffset(), ent(q.Max()-1).End())
	}
}

func TestCrashDurableNames(t *testing.T) {
	// A queue created and flushed survives a crash without torn pages
	// exactly, including its directory chain.
	cfs := vfs.NewCrashFS(1)
	s, err := OpenSet(testOpts(cfs), "/data/store/cq")
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.GetOrCreate("%RETRY%g", 2)
	if err != nil {
		t.Fatal(err)
	}
	putRange(t, q, 0, 20)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	putRange(t, q, 20, 30)
	cfs.CrashWith(vfs.CrashOptions{})
	s2, err := OpenSet(testOpts(cfs), "/data/store/cq")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	q2 := s2.Get("%RETRY%g", 2)
	if q2 == nil {
		t.Fatal("queue lost in crash")
	}
	checkState(t, q2, 0, 20, ent(19).End())
	checkEntries(t, q2, 0, stream(0, 20))
}

func TestFaults(t *testing.T) {
	cfs := vfs.NewCrashFS(2)
	q, err := OpenQueue(testOpts(cfs), "/cq", "T", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	putRange(t, q, 0, 8)
	// The next file cannot be preallocated: Put fails cleanly.
	cfs.InjectFault(vfs.Fault{Ops: vfs.OpAllocate, Count: 1, Err: vfs.ErrNoSpace})
	if err := q.Put(8, ent(8)); !errors.Is(err, vfs.ErrNoSpace) {
		t.Fatalf("Put with no space: %v", err)
	}
	checkState(t, q, 0, 8, ent(7).End())
	if names := listFiles(t, cfs, q.Dir()); len(names) != 1 {
		t.Fatalf("files after failed rollover: %v", names)
	}
	// Retry succeeds.
	putRange(t, q, 8, 10)
	// A failed datasync does not advance the flushed position.
	cfs.InjectSyncError("/cq")
	if err := q.Flush(); !errors.Is(err, vfs.ErrIO) {
		t.Fatalf("Flush with EIO: %v", err)
	}
	if q.FlushedOffset() != 0 {
		t.Fatalf("flushed advanced to %d despite EIO", q.FlushedOffset())
	}
	cfs.ClearFaults()
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if q.FlushedOffset() != 10 {
		t.Fatalf("flushed %d, want 10", q.FlushedOffset())
	}
}

func TestFlushSyncsOnlyDirtyFiles(t *testing.T) {
	cfs := vfs.NewCrashFS(3)
	q, err := OpenQueue(testOpts(cfs), "/cq", "T", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	putRange(t, q, 0, 30) // 4 files
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	before := cfs.Stats().Datasyncs
	putRange(t, q, 30, 32) // only the last file changes
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := cfs.Stats().Datasyncs - before; n != 1 {
		t.Fatalf("Flush datasynced %d files, want 1", n)
	}
	before = cfs.Stats().Datasyncs
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := cfs.Stats().Datasyncs - before; n != 0 {
		t.Fatalf("idle Flush datasynced %d files", n)
	}
	if !strings.HasPrefix(q.Dir(), "/cq/T/") {
		t.Fatalf("Dir() = %s", q.Dir())
	}
}
