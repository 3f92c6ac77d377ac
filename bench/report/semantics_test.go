package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSemanticsSection: the part round-trips through results.json and is
// shown in report.md and the terminal table; a file without it reads as
// nil and shows no section.
func TestSemanticsSection(t *testing.T) {
	r := sample()
	r.Semantics = &Semantics{Profile: "default", Producers: 64, Connections: 8, Depth: 32, BodyBytes: 128,
		Timers: &TimerBench{Status: "ok", Requested: 1000000, WindowMs: 60000, SendMsgsPerSec: 19300, PlainMsgsPerSec: 42600, SendRatio: 0.45,
			LatenessP50Ms: 1, LatenessP99Ms: 346, LatenessMaxMs: 539, Delivered: 1000000,
			Runs: []TimerRun{{Sent: 1000000, PendingAtSendEnd: 579235, RSSBeforeBytes: 32 << 20, AnonAfterSendBytes: 10 << 20}}},
		Transactions: &TxBench{Status: "error", Note: "half message: response code 16"}}
	dir := t.TempDir()
	if err := r.WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	if s := back.Semantics; s == nil || s.Timers == nil || s.Timers.SendRatio != 0.45 || s.Timers.Runs[0].PendingAtSendEnd != 579235 ||
		s.Transactions.Note != "half message: response code 16" {
		t.Fatalf("semantics lost: %+v", back.Semantics)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileJSON))
	for _, field := range []string{`"semantics"`, `"send_ratio": 0.45`, `"lateness_p99_ms": 346`, `"pending_at_send_end": 579235`, `"anon_after_send_bytes"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("results.json lacks %s", field)
		}
	}
	var tb, md bytes.Buffer
	if err := back.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	if err := back.WriteMarkdown(&md, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Message semantics", "| 19k | 43k | 0.45 | 1ms | 346ms | 539ms |", "579235", "error: half message: response code 16"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(tb.String(), "timers 1000000: 19k msg/s (0.45x plain), lateness p50 1ms p99 346ms max 539ms") {
		t.Errorf("table lacks the timer line:\n%s", tb.String())
	}
	r.Semantics = nil
	md.Reset()
	r.WriteMarkdown(&md, "")
	if strings.Contains(md.String(), "Message semantics") {
		t.Error("a run without the part shows its section")
	}
}
