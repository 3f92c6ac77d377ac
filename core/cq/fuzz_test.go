package cq

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// fuzzFileBytes is the size of a queue file in FuzzRecover (8 entries).
const fuzzFileBytes = testEPF * EntrySize

// validQueueBytes encodes entries [first, n) of ent as the contents of the
// queue files starting at the file holding first.
func validQueueBytes(first, n int64) []byte {
	start := first - first%testEPF
	b := make([]byte, (n-start)*EntrySize)
	for i := start; i < n; i++ {
		e := blankEntry
		if i >= first {
			e = ent(i)
		}
		encodeEntry(b[(i-start)*EntrySize:], e)
	}
	return b
}

// FuzzRecover feeds arbitrary file contents to OpenQueue's recovery (the
// decoder of queue files). data[0] picks the first file's index, the rest
// is cut into files of 8 entries (the last may be short). Recovery must not
// fail or panic on well-named files, and must leave zeros past the end.
// When all files are within recovery's three-file scan window (older files
// are trusted, as in RocketMQ), what it recovers must also be a consistent
// queue: readable entries valid and in commitlog order, blanks only below
// Min, the same state after a reopen, and Put at Max accepted.
func FuzzRecover(f *testing.F) {
	f.Add([]byte{0})
	f.Add(append([]byte{0}, validQueueBytes(0, 5)...))
	f.Add(append([]byte{1}, validQueueBytes(8, 20)...))
	f.Add(append([]byte{0}, validQueueBytes(3, 16)...))
	garbled := validQueueBytes(0, 12)
	garbled[7*EntrySize+9] ^= 0xff
	f.Add(append([]byte{0}, garbled...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || len(data) > 8*fuzzFileBytes {
			return
		}
		firstFile := int64(data[0] % 4)
		data = data[1:]
		cfs := vfs.NewCrashFS(1)
		opts := testOpts(cfs)
		dir := filepath.Join("/cq", "T", "0")
		if err := cfs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Recovery scans the last three files (RocketMQ's rule; older files
		// are trusted), so the order checks apply only when that is all.
		strict := len(data) <= 3*fuzzFileBytes
		for i := int64(0); len(data) > 0; i++ {
			chunk := data[:min(len(data), fuzzFileBytes)]
			data = data[len(chunk):]
			fl, err := cfs.Create(filepath.Join(dir, fileName((firstFile+i)*testEPF)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fl.WriteAt(chunk, 0); err != nil {
				t.Fatal(err)
			}
			fl.Close()
		}
		q, err := OpenQueue(opts, "/cq", "T", 0)
		if err != nil {
			t.Fatalf("OpenQueue: %v", err)
		}
		mn, mx, mp := q.Min(), q.Max(), q.MaxPhysOffset()
		if mx == 0 {
			if mn != 0 || mp != 0 {
				t.Fatalf("empty queue with Min %d MaxPhys %d", mn, mp)
			}
			if names, _ := cfs.ReadDir(dir); len(names) != 0 {
				t.Fatalf("empty queue left files %v", names)
			}
		} else {
			fl := *q.files.Load()
			if fl[0].start != firstFile*testEPF || mn < fl[0].start || mn >= mx {
				t.Fatalf("Min %d Max %d first file %d", mn, mx, fl[0].start)
			}
			ents, err := q.Get(mn, int(mx-mn), nil)
			if err != nil || int64(len(ents)) != mx-mn {
				t.Fatalf("Get: %d entries, %v", len(ents), err)
			}
			prevEnd := int64(0)
			for i, e := range ents {
				if !strict {
					prevEnd = e.End()
					continue
				}
				if !e.valid() || e.IsBlank() || e.Offset < prevEnd {
					t.Fatalf("entry %d %+v invalid or out of order (prev end %d)", mn+int64(i), e, prevEnd)
				}
				prevEnd = e.End()
			}
			if mp != prevEnd {
				t.Fatalf("MaxPhysOffset %d, last entry ends at %d", mp, prevEnd)
			}
			for i := fl[0].start; i < mn && strict; i++ {
				if !q.readLocked(fl, i).IsBlank() {
					t.Fatalf("non-blank unit %d below Min %d", i, mn)
				}
			}
			last := fl[len(fl)-1]
			if !allZero(last.b[(mx-last.start)*EntrySize:]) {
				t.Fatal("garbage left past the recovered end")
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		q, err = OpenQueue(opts, "/cq", "T", 0)
		if err != nil {
			t.Fatalf("second OpenQueue: %v", err)
		}
		defer q.Close()
		if strict && (q.Min() != mn || q.Max() != mx || q.MaxPhysOffset() != mp) {
			t.Fatalf("reopen changed Min/Max/MaxPhys %d/%d/%d to %d/%d/%d", mn, mx, mp, q.Min(), q.Max(), q.MaxPhysOffset())
		}
		if !strict {
			return
		}
		if mp < 0 {
			t.Fatalf("MaxPhysOffset %d", mp)
		}
		if mp == math.MaxInt64 {
			return // no room for another record
		}
		if err := q.Put(mx, Entry{Offset: mp, Size: 1}); err != nil {
			t.Fatalf("Put at recovered Max: %v", err)
		}
	})
}
