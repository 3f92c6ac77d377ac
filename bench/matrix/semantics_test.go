package matrix

import (
	"strings"
	"testing"
	"time"
)

func TestSemanticsSection(t *testing.T) {
	c, err := Parse("a.toml", []byte(minimal+"[semantics]\nprofile = \"default\"\ntimers = 1000000\ntx_duration = \"10s\"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Semantics
	if !s.Enabled() || s.Producers != 64 || s.Connections != 8 || s.Depth != 32 || s.BodyBytes != 128 || s.TimerWindow.D() != time.Minute || s.Repeats != 1 {
		t.Fatalf("defaults: %+v", s)
	}
	if c.SemanticsRuns() != 2 {
		t.Errorf("SemanticsRuns %d, want 2 (timers and transactions, one repeat)", c.SemanticsRuns())
	}
	q := c.Quick().Semantics
	if q.Timers != 50_000 || q.TimerWindow.D() != 5*time.Second || q.TxDuration.D() != time.Second || q.Repeats != 3 {
		t.Errorf("quick: %+v", q)
	}
	if c.Semantics.Timers != 1000000 {
		t.Error("Quick changed the original")
	}
	off, err := Parse("a.toml", []byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if off.Semantics.Enabled() || off.SemanticsRuns() != 0 {
		t.Errorf("no [semantics]: %+v", off.Semantics)
	}
}

func TestSemanticsValidation(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"profile = \"default\"\n", "nothing to run"},
		{"profile = \"default\"\ntimers = -1\n", "semantics.timers"},
		{"profile = \"default\"\ntimers = 10\ntimer_window = \"1s\"\n", "semantics.timer_window"},
		{"profile = \"default\"\ntimers = 10\nproducers = 5000\n", "semantics.producers"},
		{"profile = \"default\"\ntx_duration = \"2h\"\n", "semantics.tx_duration"},
		{"profile = \"  \"\ntimers = 10\n", "blank profile"},
		{"profile = \"default\"\ntimers = 10\nrepeat = 2\n", "repeat"},
	} {
		_, err := Parse("a.toml", []byte(minimal+"[semantics]\n"+tc.body), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one mentioning %q", tc.body, err, tc.want)
		}
	}
}
