package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailoverSection: the part round-trips through results.json and is
// shown in report.md and the terminal table; without it, results.json has
// no "failover" key and report.md no section.
func TestFailoverSection(t *testing.T) {
	r := sample()
	r.Failover = []Failover{
		{System: "keel", Replication: "sync", Crash: "kill9", Status: "ok", Producers: 8, BodyBytes: 128, Repeats: 3, FirstStoredMs: 540, FirstOKMs: 626.7,
			FirstOKMsMin: 600, FirstOKMsMax: 700, ConsumerResumeMs: 546, Acked: 5906, AckedLostRuns: []int64{0, 0, 0},
			Runs: []FailoverRun{{FirstStoredMs: 540, FirstOKMs: 626.7, ConsumerResumeMs: 546, Acked: 5906, Errors: 100, FirstError: "connection reset"}}},
		{System: "nats-jetstream", Replication: "R3", Crash: "pause", Status: "error", Note: "create stream (R3): timeout"},
	}
	dir := t.TempDir()
	if err := r.WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Failover) != 2 || back.Failover[0].FirstOKMs != 626.7 || back.Failover[0].Runs[0].FirstError != "connection reset" ||
		back.Failover[1].Note != "create stream (R3): timeout" {
		t.Fatalf("failover lost: %+v", back.Failover)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileJSON))
	for _, field := range []string{`"failover"`, `"first_ok_ms": 626.7`, `"consumer_resume_ms": 546`, `"acked_lost_runs"`} {
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
	for _, want := range []string{"## Failover", "| keel | sync | kill9 | ok | 540ms | 627ms | 600ms–700ms | 546ms | 5906 | 0 | 3 (0 missed) |",
		"| nats-jetstream | R3 | pause | error |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(tb.String(), "failover keel/sync/kill9: first SEND_OK 627ms (stored 540ms), consumer 546ms, 0 acked lost of 5906") {
		t.Errorf("table lacks the failover line:\n%s", tb.String())
	}
	r.Failover = nil
	md.Reset()
	r.WriteMarkdown(&md, "")
	if strings.Contains(md.String(), "## Failover") {
		t.Error("a run without the part shows its section")
	}
	if err := r.WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileJSON)); strings.Contains(string(b), `"failover"`) {
		t.Error("results.json has a failover key for a run without the part")
	}
}
