package core

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// warnings is a slog.Handler that keeps every record at WARN or above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// TestNormalRestartsDoNotWarn: neither a clean restart (with a
// preallocated next segment left behind) nor a crash restart whose log
// simply ends in never-written space logs a warning; a real torn record
// does. Warnings that always fire teach operators to ignore warnings.
func TestNormalRestartsDoNotWarn(t *testing.T) {
	fs := vfs.NewCrashFS(5)
	w := &warnings{}
	o := testOptions(fs, "/warn")
	o.Logger = slog.New(w)
	s := mustOpen(t, o)
	for i := 0; i < 300; i++ { // several 64 KiB segments: the preallocator runs ahead
		if _, err := s.Append(msg("T", 0, fmt.Sprintf("%0300d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, o)
	if m := w.take(); len(m) > 0 {
		t.Fatalf("clean restart warned: %q", m)
	}
	appendN(t, s, 10, "more")
	if _, err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	end := s.Positions().Committed
	s.abandon() // a process crash: the abort marker stays
	s = mustOpen(t, o)
	if m := w.take(); len(m) > 0 {
		t.Fatalf("crash restart at a clean end warned: %q", m)
	}
	if !s.Recovery().Crashed || s.Recovery().End != end {
		t.Fatalf("recovery %+v, want a crash recovery ending at %d", s.Recovery(), end)
	}
	path := s.segmentFor(end - 1).path
	appendN(t, s, 1, "torn") // not flushed: above the checkpoint
	s.abandon()
	flipByte(t, fs, path, end%o.SegmentSize+4) // the magic code of the last record
	s = mustOpen(t, o)
	defer s.Close()
	if m := w.take(); len(m) == 0 {
		t.Fatal("a torn record at the tail was cut without a warning")
	}
}
