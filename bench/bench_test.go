package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/bench/recovery"
	"github.com/keelmq/keel/bench/report"
)

func TestMain(m *testing.M) {
	recovery.MaybeChild()
	os.Exit(m.Run())
}

const tiny = `schema = 1
name = "tiny"
duration = "60ms"
warmup = "10ms"
repeats = 3
segment_size = "4MiB"
queues = 2

[ceiling]
duration = "30ms"
repeats = 1
file_size = "4MiB"

[[matrix]]
flush = ["sync", "async"]
index = ["hash"]
mode = ["builtin", "external"]
producers = [4]

[[matrix]]
workloads = ["produce-consume"]
flush = ["async"]
replication = ["sync"]
producers = [2]

[recovery]
sizes = ["1MiB"]
crashes = ["kill9", "powercut"]
flush = ["sync"]
producers = 2
repeats = 1
segment_size = "1MiB"

[peers]
nats = ["r1-default"]
redis = ["always"]
producers = [2]
duration = "60ms"
repeats = 1

[wire]
profiles = ["../configs/profiles/default.toml"]
producers = [2]
connections = 2
segment_size = "8MiB"
duration = "60ms"
repeats = 1
`

// TestEndToEnd runs the whole harness on a tiny matrix and checks every
// output and the results.json schema.
func TestEndToEnd(t *testing.T) {
	cfg, err := matrix.Parse("tiny.toml", []byte(tiny), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	var progress, summary bytes.Buffer
	start := time.Now()
	res, err := Run(context.Background(), cfg, Options{ConfigFile: "tiny.toml", Out: out, Progress: &progress, Summary: &summary})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("tiny run took %v", el)
	}
	for _, f := range []string{report.FileJSON, report.FileCSV, report.FileMarkdown, report.FileThroughput, report.FileLatency, report.FileRecovery} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "scratch")); !os.IsNotExist(err) {
		t.Errorf("scratch dir left behind")
	}

	// results.json: the fields the issue requires, by name.
	b, _ := os.ReadFile(filepath.Join(out, report.FileJSON))
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["schema_version"] != float64(report.SchemaVersion) {
		t.Errorf("schema_version = %v", raw["schema_version"])
	}
	requireKeys := func(what string, v any, keys ...string) {
		t.Helper()
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s is %T", what, v)
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s lacks %q", what, k)
			}
		}
	}
	cells := raw["cells"].([]any)
	if len(cells) != 5 {
		t.Fatalf("cells: %d", len(cells))
	}
	for _, c := range cells {
		requireKeys("cell", c, "flush", "replication", "index", "mode", "body_bytes", "producers", "msgs_per_sec", "mb_per_sec",
			"p50_us", "p99_us", "p999_us", "ceiling_ratio", "status")
	}
	requireKeys("ceilings", raw["ceilings"], "seq_write_mb_per_sec", "serial_fdatasync_per_sec", "group_commit_per_sec")
	requireKeys("group_commit_per_sec", raw["ceilings"].(map[string]any)["group_commit_per_sec"], "4", "2")
	for _, p := range raw["peers"].([]any) {
		requireKeys("peer", p, "name", "config", "msgs_per_sec", "p99_us")
	}
	for _, w := range raw["wire"].([]any) {
		requireKeys("wire", w, "name", "profile", "producers", "connections", "msgs_per_sec", "p50_us", "p99_us", "statuses")
	}
	for _, r := range raw["recovery"].([]any) {
		requireKeys("recovery", r, "profile", "store_bytes", "crash", "ready_ms", "dispatched_ms", "acked_lost")
	}

	// Round trip through the typed reader, and the semantics.
	back, err := report.ReadJSON(filepath.Join(out, report.FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	ok, skipped := 0, 0
	for _, c := range back.Cells {
		switch c.Status {
		case "ok":
			ok++
			if c.MsgsPerSec <= 0 || c.P99us < c.P50us || c.P999us < c.P99us || c.CeilingRatio <= 0 || len(c.Runs) != 3 {
				t.Errorf("cell %s: %+v", c.Key(), c)
			}
			if c.MsgsPerSecMin > c.MsgsPerSec || c.MsgsPerSec > c.MsgsPerSecMax {
				t.Errorf("cell %s: median outside its range", c.Key())
			}
			// Durable cells (sync flush) carry one ceiling probe per run.
			if durable := c.Flush == "sync"; durable != (c.Paired != nil) ||
				durable && (len(c.Paired.Ratio.Runs) != 3 || len(c.Paired.PerSec.Runs) != 3 || c.Paired.Ratio.Min > c.Paired.Ratio.Median || c.Paired.Ratio.Min <= 0) {
				t.Errorf("cell %s: paired ceiling %+v", c.Key(), c.Paired)
			}
			if len(c.Plugins) == 0 || c.Plugins[0].Name != c.Flush {
				t.Errorf("cell %s: plugins %+v", c.Key(), c.Plugins)
			}
		case "skipped":
			skipped++
			if c.Mode != "external" {
				t.Errorf("builtin cell %s skipped: %s", c.Key(), c.Note)
			}
		default:
			t.Errorf("cell %s: %s %s", c.Key(), c.Status, c.Note)
		}
	}
	if ok != 3 || skipped != 2 {
		t.Errorf("ok %d skipped %d", ok, skipped)
	}
	if back.Ceilings.SeqWriteMBPerSec <= 0 || back.Ceilings.SerialFdatasyncPerSec <= 0 {
		t.Errorf("ceilings: %+v", back.Ceilings)
	}
	if len(back.Peers) != 2 || back.Peers[0].Status != "ok" {
		t.Errorf("peers: %+v", back.Peers)
	}
	if len(back.Wire) != 4 || back.Wire[0].Status != "ok" || back.Wire[0].Statuses["SEND_OK"] == 0 || back.Wire[0].RatioToNATS <= 0 ||
		back.Wire[0].RatioToNATSTCP <= 0 || back.Wire[0].RatioToFloor <= 0 || back.Wire[1].Name != "nats-jetstream" || back.Wire[1].Status != "ok" ||
		back.Wire[2].Profile != "r1-default-tcp" || back.Wire[2].Status != "ok" || back.Wire[3].Name != "protocol-floor" || back.Wire[3].Status != "ok" {
		t.Errorf("wire: %+v", back.Wire)
	}
	for _, r := range back.Recovery {
		if r.Status != "ok" || r.AckedLost != 0 || r.Acked == 0 {
			t.Errorf("recovery %s/%s: %+v", r.Crash, r.Profile, r)
		}
	}
	if !strings.Contains(summary.String(), "CEILINGS") || !strings.Contains(summary.String(), "produce/sync/none/hash/builtin/128B/p4") {
		t.Errorf("summary:\n%s", summary.String())
	}
	md, _ := os.ReadFile(filepath.Join(out, report.FileMarkdown))
	for _, want := range []string{"## Disk ceilings", "## Cells", "## Peers", "## Recovery", report.FileThroughput} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if res.Machine.CPUs == 0 || res.Machine.Disk == "" {
		t.Errorf("machine: %+v", res.Machine)
	}
}

func TestMainFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--config"},
		{"--config", "x.toml", "extra"},
		{"--config", "/nonexistent.toml"},
		{"--config", "../configs/bench/quick.toml", "--skip", "everything"},
	} {
		if err := Main(args); err == nil {
			t.Errorf("Main(%q) should fail", args)
		}
	}
}
