package core

import "testing"

// TestVerifyFromIsBounded: VerifyFrom trails the flushed offset by about
// VerifyWindow, and never by more than 4 windows, even when flushes are
// rare and huge (an async flush behind a big backlog).
func TestVerifyFromIsBounded(t *testing.T) {
	const w = 64 << 20
	s := &Store{}
	s.opts.VerifyWindow = w
	cases := []struct{ flushed, want int64 }{
		{0, 0},
		{100 << 20, 0},           // 100 MiB: the start is within 4 windows
		{200 << 20, 100 << 20},   // the newest entry at least a window below
		{2100 << 20, 2100 << 20}, // a jump of 1.9 GiB: no history within 4 windows
		{2150 << 20, 2100 << 20},
		{2200 << 20, 2100 << 20},
		{2300 << 20, 2200 << 20},
	}
	for _, c := range cases {
		if got := s.verifyFromLocked(c.flushed, 0); got != c.want {
			t.Fatalf("flushed %d MiB: VerifyFrom %d MiB, want %d MiB (history %v)", c.flushed>>20, got>>20, c.want>>20, s.flushHist)
		}
	}
}
