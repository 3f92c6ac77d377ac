package core

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// TestLogFilesReadsWhatTheStoreReads: for every record boundary of a log
// spanning several segments (small records, records longer than the first
// read, BLANK ends), LogFiles.ReadInto returns what Store.ReadLog returns,
// and with a lower committed bound a prefix of it that stops at the bound.
func TestLogFilesReadsWhatTheStoreReads(t *testing.T) {
	s := mustOpen(t, testOptions(vfs.OS, t.TempDir()))
	defer s.Close()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 400; i++ {
		n := 1 + rng.Intn(200)
		if i%25 == 0 {
			n = 6000 + rng.Intn(2000) // longer than logFilesFirstRead
		}
		if _, err := s.Append(msg("T", int32(i%4), strings.Repeat("b", n))); err != nil {
			t.Fatal(err)
		}
	}
	dir, segSize, ok := s.LogLocation()
	if !ok {
		t.Fatal("LogLocation: not ok on vfs.OS")
	}
	lf, err := OpenLogFiles(dir, segSize)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	committed := s.Positions().Committed
	if committed < 3*segSize {
		t.Fatalf("the log spans %d bytes, want several %d-byte segments", committed, segSize)
	}
	var bounds []int64
	var buf []byte
	for from := s.Positions().Min; from < committed; {
		bounds = append(bounds, from)
		for _, maxBytes := range []int{1, 512, 4096, 1 << 20} {
			want, err := s.ReadLog(from, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			got, err := lf.ReadInto(from, committed, maxBytes, buf)
			if err != nil {
				t.Fatalf("ReadInto(%d, max %d): %v", from, maxBytes, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("ReadInto(%d, max %d) = %d bytes, ReadLog %d", from, maxBytes, len(got), len(want))
			}
			buf = got
		}
		one, _ := s.ReadLog(from, 1)
		from += int64(len(one))
	}
	// A lower committed bound: never a byte at or past it.
	for i := 0; i+1 < len(bounds); i += 7 {
		from, bound := bounds[i], bounds[min(i+3, len(bounds)-1)]
		got, err := lf.ReadInto(from, bound, 1<<20, nil)
		if err != nil {
			t.Fatalf("ReadInto(%d, bound %d): %v", from, bound, err)
		}
		full, _ := s.ReadLog(from, 1<<20)
		if from+int64(len(got)) > bound || !bytes.HasPrefix(full, got) || len(got) == 0 {
			t.Fatalf("ReadInto(%d, bound %d) = %d bytes (store %d)", from, bound, len(got), len(full))
		}
	}
	// Not a record boundary, or at the bound: an error, so the caller asks
	// the store.
	if _, err := lf.ReadInto(bounds[1]+3, committed, 4096, nil); err == nil {
		t.Error("ReadInto inside a record: no error")
	}
	if _, err := lf.ReadInto(committed, committed, 4096, nil); err == nil {
		t.Error("ReadInto at the committed offset: no error")
	}
}

func TestLogLocationOnlyOnTheOSFilesystem(t *testing.T) {
	s := mustOpen(t, testOptions(vfs.NewCrashFS(1), "/store"))
	defer s.Close()
	if _, _, ok := s.LogLocation(); ok {
		t.Fatal("LogLocation ok on a crash-simulating filesystem")
	}
}
