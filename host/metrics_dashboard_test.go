package host

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// dashboardMetric matches the metric names a dashboard query can use:
// keel's own series and VictoriaMetrics/metrics' go_* and process_* ones.
// Label names (topic, group, instance...) never start so.
var dashboardMetric = regexp.MustCompile(`\b(?:keel|go|process)_[a-zA-Z0-9_:]*[a-zA-Z0-9]\b`)

// dashboardExprs returns every "expr" and "query"/"definition" string of
// the dashboard JSON, wherever it is nested.
func dashboardExprs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "expr" || k == "definition") {
				out = append(out, s)
				continue
			}
			out = append(out, dashboardExprs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, dashboardExprs(e)...)
		}
	}
	return out
}

// TestGrafanaDashboardUsesLiveSeries loads docs/grafana/keel-dashboard.json
// and checks that every metric name its queries reference is a series a
// live node exports on /metrics (after a send and a commit, so the
// per-topic and per-group families have samples).
func TestGrafanaDashboardUsesLiveSeries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "grafana", "keel-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	exprs := dashboardExprs(dash["panels"])
	if len(exprs) < 10 {
		t.Fatalf("the dashboard has %d panel queries; expected the full set", len(exprs))
	}
	used := map[string]bool{}
	for _, e := range append(exprs, dashboardExprs(dash["templating"])...) {
		names := dashboardMetric.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("query %q references no keel, go or process series", e)
		}
		for _, n := range names {
			used[n] = true
		}
	}

	n := startTestNode(t)
	seedTopicT(t, n, 2, map[string]int64{"G": 1})
	// A histogram appears with its first observation: flush once rather
	// than wait for the flush plugin's next thorough flush; scrape again
	// until everything is there or the deadline passes.
	if _, err := n.Store().Flush(); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		exported := map[string]bool{}
		for _, s := range scrape(t, n) {
			exported[s.name] = true
		}
		missing = missing[:0]
		for name := range used {
			if !exported[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard uses series a node does not export: %s", strings.Join(missing, ", "))
	}
	for _, want := range []string{"keel_topic_messages_in_total", "keel_consumer_lag_bytes", "keel_consumer_last_consume_timestamp_seconds", "process_resident_memory_bytes"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}
