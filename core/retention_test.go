package core

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core/epoch"
	"github.com/keelmq/keel/core/vfs"
)

func allHours() []int {
	h := make([]int, 24)
	for i := range h {
		h[i] = i
	}
	return h
}

func TestRetentionByAge(t *testing.T) {
	fs := vfs.NewCrashFS(31)
	var now atomic.Int64
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	now.Store(t0)
	o := testOptions(fs, "/ret")
	o.Now = now.Load
	o.Retention = RetentionOptions{FileReservedTime: time.Hour, DeleteWhen: allHours(), CleanEvery: time.Hour}
	s := mustOpen(t, o)
	if err := s.Epochs().Append(epoch.Entry{Epoch: 1, StartOffset: 0}); err != nil {
		t.Fatal(err)
	}
	old := appendN(t, s, 1500, "old") // several 64 KiB segments
	now.Store(t0 + 30*60*1000)
	if err := s.Epochs().Append(epoch.Entry{Epoch: 2, StartOffset: s.Positions().Committed}); err != nil {
		t.Fatal(err)
	}
	fresh := appendN(t, s, 600, "fresh")
	s.Flush()
	drain(t, s)
	segsBefore := len(*s.segs.Load())

	// Nothing has expired yet.
	if n, err := s.Clean(false); err != nil || n != 0 {
		t.Fatalf("clean before expiry deleted %d (%v)", n, err)
	}
	// Two hours on: the segments whose last write (the next segment's first
	// record) is older than an hour go; the active one never does.
	now.Store(t0 + 2*time.Hour.Milliseconds())
	n, err := s.Clean(false)
	if err != nil || n == 0 {
		t.Fatalf("clean after expiry: %d %v", n, err)
	}
	segs := *s.segs.Load()
	if len(segs) != segsBefore-n || len(segs) < 1 {
		t.Fatalf("%d segments left of %d after deleting %d", len(segs), segsBefore, n)
	}
	minOff := s.Positions().Min
	if minOff != segs[0].start {
		t.Fatalf("min %d, first segment starts at %d", minOff, segs[0].start)
	}
	if _, err := s.ReadRecord(old[0].PhysOffset); !errors.Is(err, ErrOffset) {
		t.Fatalf("deleted record still readable: %v", err)
	}
	for _, r := range fresh[len(fresh)-10:] {
		if _, err := s.ReadRecord(r.PhysOffset); err != nil {
			t.Fatalf("recent record lost: %v", err)
		}
	}
	// Queue minimums follow; a pull below the minimum is corrected to it.
	lo := s.MinQueueOffset("T", 0)
	if lo == 0 {
		t.Fatal("queue minimum did not move")
	}
	g, err := s.GetMessages("T", 0, 0, 10, 1<<20, nil)
	if err != nil || g.Status != OffsetTooSmall || g.NextOffset != lo {
		t.Fatalf("pull below min: %v %v next %d want %d", err, g.Status, g.NextOffset, lo)
	}
	// The epoch history keeps the epoch holding the minimum.
	if es := s.Epochs().Entries(); len(es) == 0 || es[len(es)-1].Epoch != 2 {
		t.Fatalf("epochs after retention: %v", es)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, o)
	defer s.Close()
	if s.Positions().Min != minOff || s.MinQueueOffset("T", 0) != lo {
		t.Fatalf("after reopen min %d (want %d), queue min %d (want %d)", s.Positions().Min, minOff, s.MinQueueOffset("T", 0), lo)
	}
	verifyStore(t, s)
}

func TestRetentionByDiskUsage(t *testing.T) {
	fs := vfs.NewCrashFS(32)
	o := testOptions(fs, "/du")
	// Never at this hour, never expired: only disk pressure deletes.
	o.Retention = RetentionOptions{FileReservedTime: 1000 * time.Hour, DeleteWhen: []int{(time.Now().Hour() + 12) % 24}, CleanEvery: time.Hour}
	w := &warnings{}
	o.Logger = slog.New(w)
	s := mustOpen(t, o)
	defer s.Close()
	appendN(t, s, 1500, "x")
	s.Flush()
	drain(t, s)
	if n, _ := s.Clean(false); n != 0 {
		t.Fatalf("deleted %d without pressure", n)
	}
	du, _ := fs.DiskUsage("/du")
	used := int64(du.Total - du.Avail)
	fs.SetCapacity(used * 100 / 87) // 87% used: above clean-forcibly (85%), below warning (90%)
	w.take()
	n, err := s.Clean(false)
	if err != nil || n == 0 {
		t.Fatalf("clean under disk pressure: %d %v", n, err)
	}
	// Deleting unexpired segments loses messages consumers may not have
	// read: it is a warning and a counted event, not an INFO line.
	if got := s.ForcedDeletions(); got != int64(n) {
		t.Fatalf("ForcedDeletions = %d after %d deletions of unexpired segments", got, n)
	}
	if m := w.take(); len(m) != 1 {
		t.Fatalf("forced deletion logged %d warnings, want 1: %q", len(m), m)
	}
	if err := s.Writable(); err != nil {
		t.Fatalf("87%% used must not refuse writes: %v", err)
	}
	verifyStore(t, s)
	if len(*s.segs.Load()) < 1 {
		t.Fatal("active segment deleted")
	}
}

// TestRetentionKeepsUndispatched: a segment whose records are not yet
// dispatched (or not flushed) is never deleted, whatever the pressure.
func TestRetentionKeepsUndispatched(t *testing.T) {
	fs := vfs.NewCrashFS(33)
	o := testOptions(fs, "/ud")
	o.VisibleAfterFlush = true // nothing is dispatched until flushed
	o.Retention = RetentionOptions{FileReservedTime: time.Millisecond, DeleteWhen: allHours(), CleanEvery: time.Hour}
	s := mustOpen(t, o)
	defer s.Close()
	appendN(t, s, 1500, "x")
	time.Sleep(5 * time.Millisecond)
	if n, err := s.Clean(true); err != nil || n != 0 {
		t.Fatalf("deleted %d unflushed/undispatched segments (%v)", n, err)
	}
	s.Flush()
	drain(t, s)
	if n, err := s.Clean(true); err != nil || n == 0 {
		t.Fatalf("forced clean after flush and dispatch: %d %v", n, err)
	}
}
