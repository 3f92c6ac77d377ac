package semantics

import (
	"bufio"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/bench/wire"
)

// profile finds the default profile from the package directory.
func profile(t testing.TB) string {
	t.Helper()
	p, err := wire.FindProfile("default", filepath.Join("..", "..", "configs", "profiles"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunTimers: every timer the generator stored is delivered once, none
// before due, and the row's counts add up.
func TestRunTimers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and waits for timers")
	}
	const count, window = 2000, 3 * time.Second
	r, err := RunTimers(context.Background(), TimerSpec{
		Node:  wire.NodeSpec{Profile: profile(t), Dir: t.TempDir(), Queues: 4, SegmentSize: 16 << 20},
		Load:  wire.LoadSpec{Producers: 16, Conns: 2, BodyBytes: 64, Duration: time.Minute},
		Count: count, Window: window,
	})
	if err != nil {
		t.Fatal(err)
	}
	row := r.Row
	t.Logf("%+v", row)
	if row.Sent < count || row.Sent > count+16 {
		t.Errorf("sent %d, want %d (a producer past the count sends no more)", row.Sent, count)
	}
	if row.Delivered != row.Sent || row.Missing != 0 || row.Duplicates != 0 || row.Early != 0 {
		t.Errorf("delivered %d of %d, %d missing, %d duplicates, %d early", row.Delivered, row.Sent, row.Missing, row.Duplicates, row.Early)
	}
	if got := r.Lateness.Count(); got != uint64(row.Delivered) {
		t.Errorf("lateness recorded for %d copies, delivered %d", got, row.Delivered)
	}
	if row.RSSBeforeBytes == 0 || row.HeapAfterSendBytes == 0 {
		t.Errorf("memory not sampled: %+v", row)
	}
}

// TestDelaySpread: delays stay in [MinDelay, window] and cover it.
func TestDelaySpread(t *testing.T) {
	const window = 10 * time.Second
	d := Delay(window)
	lo, hi := window, time.Duration(0)
	for p := range 64 {
		for seq := uint64(1); seq <= 200; seq++ {
			v := d(wire.MessageID(p, seq))
			if v < MinDelay || v > window {
				t.Fatalf("delay %v outside [%v, %v]", v, MinDelay, window)
			}
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if lo > MinDelay+200*time.Millisecond || hi < window-200*time.Millisecond {
		t.Errorf("delays span [%v, %v], want nearly [%v, %v]", lo, hi, MinDelay, window)
	}
}

func TestParseStatus(t *testing.T) {
	in := "Name:\tkeel\nVmRSS:\t  2048 kB\nRssAnon:\t  1024 kB\nRssFile:\t 1024 kB\nThreads: 9\n"
	rss, anon := parseStatus(bufio.NewScanner(strings.NewReader(in)))
	if rss != 2048<<10 || anon != 1024<<10 {
		t.Errorf("rss %d anon %d", rss, anon)
	}
}

// TestRunTx: every acknowledged commit is visible in the real queues; a
// plain run of the same client stores messages too.
func TestRunTx(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	for _, tx := range []bool{true, false} {
		r, err := RunTx(context.Background(), TxSpec{Node: wire.NodeSpec{Profile: profile(t), Dir: t.TempDir(), Queues: 4, SegmentSize: 16 << 20},
			Producers: 8, Conns: 2, BodyBytes: 64, Queues: 4, Duration: 500 * time.Millisecond, Transactional: tx})
		if err != nil {
			t.Fatalf("transactional %v: %v", tx, err)
		}
		t.Logf("transactional %v: %d done, %.0f/s, %d visible, %d errors (%s)", tx, r.Done, r.PerSec, r.Visible, r.Errors, r.FirstError)
		if r.Errors != 0 {
			t.Errorf("transactional %v: %d errors, first: %s", tx, r.Errors, r.FirstError)
		}
		if tx && r.Visible != r.Done {
			t.Errorf("%d commits acknowledged, %d committed messages in the real queues", r.Done, r.Visible)
		}
	}
}

// TestRunPart: a tiny part yields both entries with status ok and their
// ratios; a missing profile is an error row, not a panic.
func TestRunPart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	c := matrix.SemanticsConfig{Profile: profile(t), Producers: 8, Connections: 2, Depth: 8, BodyBytes: 64, Timers: 500,
		TimerWindow: matrix.Duration(2 * time.Second), TxDuration: matrix.Duration(300 * time.Millisecond), Repeats: 1}
	steps := 0
	s := RunPart(context.Background(), c, PartOptions{Scratch: t.TempDir(), Queues: 4, SegmentSize: 16 << 20, Step: func(string) { steps++ }})
	if s == nil || s.Timers == nil || s.Transactions == nil {
		t.Fatalf("part result %+v", s)
	}
	if s.Timers.Status != "ok" || s.Transactions.Status != "ok" {
		t.Fatalf("timers %s (%s), transactions %s (%s)", s.Timers.Status, s.Timers.Note, s.Transactions.Status, s.Transactions.Note)
	}
	if s.Timers.SendRatio <= 0 || s.Transactions.Ratio <= 0 || s.Timers.Delivered != 500 {
		t.Errorf("timers %+v, transactions %+v", s.Timers, s.Transactions)
	}
	cfg := matrix.Config{Semantics: c}
	if steps != cfg.SemanticsRuns() {
		t.Errorf("%d steps, SemanticsRuns says %d", steps, cfg.SemanticsRuns())
	}
	c.Profile = "no-such-profile"
	s = RunPart(context.Background(), c, PartOptions{Scratch: t.TempDir()})
	if s.Timers.Status != "error" || !strings.Contains(s.Timers.Note, "no-such-profile") {
		t.Errorf("missing profile: timers %+v", s.Timers)
	}
}
