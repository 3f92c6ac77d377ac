package semantics

import (
	"bufio"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/wire"
)

// profile finds the default profile from the package directory.
func profile(t *testing.T) string {
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
