package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/keelmq/keel/bench/ceiling"
	"github.com/keelmq/keel/bench/hist"
)

func sample() *Results {
	return &Results{SchemaVersion: SchemaVersion, Tool: "keel bench", Config: "t",
		Ceilings: Ceilings{SeqWriteMBPerSec: 800, SerialFdatasyncPerSec: 3000, GroupCommitPerSec: map[string]float64{"1": 3000, "64": 80000},
			Detail: &ceiling.Result{SeqWrite: []ceiling.SeqWrite{{Method: ceiling.MethodMmap, WriteBytes: 1 << 20, MBPerSec: ceiling.NewStat([]float64{800})}}}},
		Cells: []Cell{
			{Workload: "produce", Flush: "sync", Replication: "none", Index: "hash", Mode: "builtin", BodyBytes: 128, Producers: 64, Status: "ok",
				MsgsPerSec: 70000, MsgsPerSecMin: 60000, MsgsPerSecMax: 75000, P50us: 500, P99us: 2000, P999us: 4000, CeilingRatio: 0.875,
				Ceiling: "group commit p64", CeilingValue: 80000, Statuses: map[string]int64{"SEND_OK": 10},
				CDF: []CDFPoint{{Us: 100, Fraction: 0.1}, {Us: 500, Fraction: 0.5}, {Us: 4000, Fraction: 1}}},
			{Workload: "produce", Flush: "sync", Replication: "none", Index: "hash", Mode: "external", BodyBytes: 128, Producers: 64, Status: "skipped", Note: "no plugin, \"quoted\""},
		},
		Peers: []Peer{{Name: "nats-jetstream", Config: "r1-sync", Producers: 64, BodyBytes: 128, Status: "ok", MsgsPerSec: 3000, MsgsPerSecMin: 2900, MsgsPerSecMax: 3100,
			P99us: 900, CDF: []CDFPoint{{Us: 300, Fraction: 0.5}, {Us: 900, Fraction: 1}}}},
		Recovery: []Recovery{
			{Profile: "sync-flush", Crash: "kill9", BodyBytes: 128, TargetBytes: 16 << 20, StoreBytes: 17 << 20, Status: "ok", ReadyMs: 20, DispatchedMs: 40,
				ScanBytes: 3 << 20, PhasesMs: map[string]float64{"segments": 0.5, "queues": 2, "scan": 15.5, "cut": 1, "finish": 1}},
			{Profile: "sync-flush", Crash: "kill9", BodyBytes: 128, TargetBytes: 64 << 20, StoreBytes: 65 << 20, Status: "ok", ReadyMs: 30, DispatchedMs: 90,
				ScanBytes: 5 << 20, PhasesMs: map[string]float64{"queues": 3, "scan": 24, "cut": 2}},
			{Profile: "sync-flush", Crash: "kill9", BodyBytes: 4096, TargetBytes: 16 << 20, StoreBytes: 18 << 20, Status: "ok", ReadyMs: 4, DispatchedMs: 6},
			{Profile: "sync-flush", Crash: "kill9", BodyBytes: 4096, TargetBytes: 64 << 20, StoreBytes: 66 << 20, Status: "ok", ReadyMs: 5, DispatchedMs: 8},
			{Profile: "sync-flush", Crash: "powercut", BodyBytes: 4096, TargetBytes: 1 << 30, Status: "skipped", Note: "above max_powercut_size"},
		},
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := sample()
	dir := t.TempDir()
	if err := r.WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	if back.Cells[0].MsgsPerSec != 70000 || back.Ceilings.GroupCommitPerSec["64"] != 80000 || back.Recovery[1].DispatchedMs != 90 {
		t.Fatalf("round trip lost data: %+v", back)
	}
	// A future schema is refused.
	b, _ := os.ReadFile(filepath.Join(dir, FileJSON))
	var m map[string]any
	json.Unmarshal(b, &m)
	m["schema_version"] = SchemaVersion + 1
	b, _ = json.Marshal(m)
	os.WriteFile(filepath.Join(dir, "future.json"), b, 0o644)
	if _, err := ReadJSON(filepath.Join(dir, "future.json")); err == nil {
		t.Fatal("a future schema_version must be refused")
	}
}

func TestCSV(t *testing.T) {
	var buf bytes.Buffer
	if err := sample().WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || len(rows[0]) != len(CSVHeader) || rows[1][8] != "70000" || !strings.Contains(rows[2][len(CSVHeader)-1], `"quoted"`) {
		t.Fatalf("rows: %q", rows)
	}
}

func TestSVGWellFormed(t *testing.T) {
	for _, r := range []*Results{sample(), {}} {
		for name, f := range map[string]func(io.Writer) error{"throughput": r.ThroughputSVG, "latency": r.LatencySVG, "recovery": r.RecoverySVG} {
			var buf bytes.Buffer
			if err := f(&buf); err != nil {
				t.Fatal(err)
			}
			dec := xml.NewDecoder(&buf)
			for {
				_, err := dec.Token()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: invalid SVG: %v", name, err)
				}
			}
		}
	}
}

func TestTableAndMarkdown(t *testing.T) {
	var tb, md bytes.Buffer
	r := sample()
	if err := r.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteMarkdown(&md, "img/"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"88% of group commit p64", "skipped", "nats-jetstream/r1-sync", "kill9/sync-flush/128B/16.0 MiB",
		"kill9/sync-flush/4096B/64.0 MiB", "scan 15.5", "3.0 MiB"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	if !strings.Contains(md.String(), "](img/throughput.svg)") {
		t.Errorf("markdown chart links lack the prefix")
	}
	// The recovery table has a body-size column, what Open scanned and
	// where its time went.
	for _, want := range []string{"| crash | profile | body | store |", "| scanned | Open's slowest phases, ms |",
		"| kill9 | sync-flush | 128 B | 17.0 MiB | 20.0 [0.0–0.0] | 40.0 [0.0–0.0] | 3.0 MiB | scan 15.5, queues 2.0, cut 1.0 |",
		"| kill9 | sync-flush | 4 KiB | 66.0 MiB |", "| powercut | sync-flush | 4 KiB | 1.0 GiB | skipped: above max_powercut_size |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// TestRecoveryRows: body size, scan bytes and phases survive results.json,
// and a file written before recovery rows had them still reads.
func TestRecoveryRows(t *testing.T) {
	dir := t.TempDir()
	if err := sample().WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	x := back.Recovery[0]
	if x.BodyBytes != 128 || back.Recovery[2].BodyBytes != 4096 || x.ScanBytes != 3<<20 || x.PhasesMs["scan"] != 15.5 ||
		x.SlowestPhases(1) != "scan 15.5" || back.Recovery[2].SlowestPhases(3) != "" {
		t.Fatalf("recovery rows lost data: %+v", back.Recovery)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileJSON))
	for _, field := range []string{`"body_bytes": 4096`, `"scan_bytes": 3145728`, `"phases_ms"`, `"scan": 15.5`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("results.json lacks %s", field)
		}
	}
	old := `{"schema_version":1,"recovery":[{"profile":"sync-flush","crash":"kill9","target_bytes":16777216,"store_bytes":17825792,"status":"ok","ready_ms":20,"dispatched_ms":40}]}`
	os.WriteFile(filepath.Join(dir, "old.json"), []byte(old), 0o644)
	o, err := ReadJSON(filepath.Join(dir, "old.json"))
	if err != nil || len(o.Recovery) != 1 || o.Recovery[0].BodyBytes != 0 {
		t.Fatalf("old results: %v, %+v", err, o)
	}
	var md, chart bytes.Buffer
	if err := o.WriteMarkdown(&md, ""); err != nil || !strings.Contains(md.String(), "| kill9 | sync-flush | ? | 17.0 MiB |") {
		t.Errorf("old results' markdown (%v):\n%s", err, md.String())
	}
	if err := o.RecoverySVG(&chart); err != nil || !strings.Contains(chart.String(), "kill9 / sync-flush / ?") {
		t.Errorf("old results' chart (%v):\n%s", err, chart.String())
	}
}

// TestRecoverySVG: one legend entry and one solid plus one dashed line
// per (crash, profile, body size); the skipped row draws nothing.
func TestRecoverySVG(t *testing.T) {
	var buf bytes.Buffer
	if err := sample().RecoverySVG(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"kill9 / sync-flush / 128 B", "kill9 / sync-flush / 4 KiB", "fully dispatched", "ready (core.Open)",
		"128 B bodies", "4 KiB bodies", "16 MiB", "128 MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(out, "powercut") {
		t.Error("the skipped powercut row is drawn")
	}
	if n := strings.Count(out, "<polyline"); n != 4 {
		t.Errorf("%d lines, want 4 (ready and dispatched for 2 body sizes)", n)
	}
	if n := len(regexp.MustCompile(`<polyline [^>]*stroke-dasharray`).FindAllString(out, -1)); n != 2 {
		t.Errorf("%d dashed lines, want 2", n)
	}
}

func TestWireRows(t *testing.T) {
	r := sample()
	r.Wire = []Wire{
		{Name: "keel", Profile: "sync-flush", Producers: 64, Connections: 8, Depth: 32, BodyBytes: 128, Status: "ok", MsgsPerSec: 90000,
			MsgsPerSecMin: 80000, MsgsPerSecMax: 95000, P50us: 600, P99us: 3000, Statuses: map[string]int64{"SEND_OK": 270000},
			NATSMsgsPerSec: 50000, RatioToNATS: 1.8, FloorMsgsPerSec: 120000, RatioToFloor: 0.75},
		{Name: "nats-jetstream", Profile: "r1-default", Producers: 64, Connections: 8, BodyBytes: 128, Status: "ok", MsgsPerSec: 50000},
		{Name: "keel", Profile: "default", Producers: 64, BodyBytes: 128, Status: "error", Note: "start failed"},
	}
	dir := t.TempDir()
	if err := r.WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Wire) != 3 || back.Wire[0].RatioToNATS != 1.8 || back.Wire[0].Statuses["SEND_OK"] != 270000 || back.Wire[0].Key() != "keel/sync-flush/128B/p64" {
		t.Fatalf("wire rows lost: %+v", back.Wire)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileJSON))
	for _, field := range []string{`"wire"`, `"ratio_to_nats": 1.8`, `"ratio_to_floor": 0.75`, `"p50_us": 600`, `"connections": 8`, `"profile": "sync-flush"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("results.json lacks %s", field)
		}
	}
	// A results.json written before the wire part still reads.
	var m map[string]any
	json.Unmarshal(b, &m)
	delete(m, "wire")
	b, _ = json.Marshal(m)
	os.WriteFile(filepath.Join(dir, "old.json"), b, 0o644)
	if old, err := ReadJSON(filepath.Join(dir, "old.json")); err != nil || len(old.Wire) != 0 {
		t.Fatalf("old results: %v, %d wire rows", err, len(old.Wire))
	}
	var tb, md bytes.Buffer
	r.WriteTable(&tb)
	r.WriteMarkdown(&md, "")
	for _, want := range []string{"keel/sync-flush/128B/p64", "1.80×", "0.75×", "start failed"} {
		if !strings.Contains(tb.String(), want) || !strings.Contains(md.String(), strings.TrimPrefix(want, "keel/sync-flush/128B/p64")) {
			t.Errorf("table or markdown lacks %q:\n%s\n%s", want, tb.String(), md.String())
		}
	}
	if !strings.Contains(md.String(), "## Wire") {
		t.Errorf("markdown lacks the wire section")
	}
}

// TestThinCDF: at most 64 points, in µs, increasing, ending at the
// histogram's last point.
func TestThinCDF(t *testing.T) {
	var h hist.Histogram
	if pts := ThinCDF(&h); len(pts) != 0 {
		t.Fatalf("empty histogram: %v", pts)
	}
	for i := int64(1); i <= 100000; i++ {
		h.Record(i * 997)
	}
	full := h.CDF()
	pts := ThinCDF(&h)
	if len(pts) == 0 || len(pts) > 65 || len(full) <= 64 {
		t.Fatalf("%d points from %d", len(pts), len(full))
	}
	last := full[len(full)-1]
	if got := pts[len(pts)-1]; got.Us != float64(last.Value)/1e3 || got.Fraction != last.Fraction {
		t.Fatalf("last point %+v, want %+v", got, last)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Us <= pts[i-1].Us || pts[i].Fraction < pts[i-1].Fraction {
			t.Fatalf("not increasing at %d: %+v", i, pts[i-1:i+1])
		}
	}
}
