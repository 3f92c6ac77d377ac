package host

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
)

// scrape returns /metrics parsed, failing the test if it is not valid
// Prometheus text.
func scrape(t *testing.T, n *Node) []promSample {
	t.Helper()
	code, text := adminDo(t, n, http.MethodGet, "/metrics", nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	samples, err := parsePrometheusText(text)
	if err != nil {
		t.Fatalf("/metrics is not valid Prometheus text: %v\n%s", err, text)
	}
	return samples
}

// sampleOf finds the sample of name whose labels include labels.
func sampleOf(samples []promSample, name string, labels map[string]string) (float64, bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && s.labels[k] == v
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

// seedTopicT creates topic T (one queue) on n, stores count messages
// through the broker's Append, commits each group's offset on T/0 and
// waits until the messages are dispatched. It returns the append results.
func seedTopicT(t *testing.T, n *Node, count int, commits map[string]int64) []core.AppendResult {
	t.Helper()
	if err := n.Store().Meta().Topics.Put(meta.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	host := netip.MustParseAddrPort("127.0.0.1:1")
	var out []core.AppendResult
	for i := range count {
		res, err := backend{n}.Append(context.Background(), []*record.Message{{Topic: "T", Body: []byte(fmt.Sprint("message-", i)), BornHost: host, StoreHost: host, BornTimestamp: 1}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res...)
	}
	for g, off := range commits {
		if err := n.Store().Meta().ConsumerOffsets.Commit(g, "T", 0, off); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for n.Store().MaxQueueOffset("T", 0) < int64(count) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return out
}

// TestMetricsTopicInLagBytesAndProcess sends through the broker's Append,
// commits, and finds the per-topic in counters, the lag in bytes, the last
// consume time, the series cap gauge and the Go runtime and process series
// on /metrics.
func TestMetricsTopicInLagBytesAndProcess(t *testing.T) {
	n := startTestNode(t)
	var sizes, stored []int64
	for _, r := range seedTopicT(t, n, 5, map[string]int64{"G": 2, "Done": 5}) {
		sizes = append(sizes, int64(r.Size))
		stored = append(stored, r.StoreTimestamp)
	}
	samples := scrape(t, n)
	var total int64
	for _, s := range sizes {
		total += s
	}
	topic := map[string]string{"topic": "T"}
	if v, ok := sampleOf(samples, "keel_topic_messages_in_total", topic); !ok || v != 5 {
		t.Errorf("keel_topic_messages_in_total{topic=T} = %v %v, want 5", v, ok)
	}
	if v, ok := sampleOf(samples, "keel_topic_bytes_in_total", topic); !ok || v != float64(total) {
		t.Errorf("keel_topic_bytes_in_total{topic=T} = %v %v, want %d", v, ok, total)
	}
	g := map[string]string{"group": "G", "topic": "T", "queue": "0"}
	// One queue in the log: the span is exactly messages 2..4.
	if v, ok := sampleOf(samples, "keel_consumer_lag_bytes", g); !ok || v != float64(sizes[2]+sizes[3]+sizes[4]) {
		t.Errorf("keel_consumer_lag_bytes = %v %v, want %d", v, ok, sizes[2]+sizes[3]+sizes[4])
	}
	if v, ok := sampleOf(samples, "keel_consumer_last_consume_timestamp_seconds", g); !ok || v != float64(stored[1])/1000 {
		t.Errorf("keel_consumer_last_consume_timestamp_seconds = %v %v, want %v", v, ok, float64(stored[1])/1000)
	}
	done := map[string]string{"group": "Done", "topic": "T", "queue": "0"}
	if v, ok := sampleOf(samples, "keel_consumer_lag_bytes", done); !ok || v != 0 {
		t.Errorf("lag bytes of a caught-up group = %v %v, want 0", v, ok)
	}
	if v, ok := sampleOf(samples, "keel_metrics_series_dropped", map[string]string{"family": "group_queue"}); !ok || v != 0 {
		t.Errorf("keel_metrics_series_dropped = %v %v, want 0", v, ok)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_max_fds"} {
		if v, ok := sampleOf(samples, name, nil); !ok || (strings.HasSuffix(name, "_fds") && v <= 0) {
			t.Errorf("%s = %v %v, want a sample", name, v, ok)
		}
	}
}

// TestTopicCountersCap: topics beyond maxTopicSeries are counted under
// __other__, and the ones already known keep their own series.
func TestTopicCountersCap(t *testing.T) {
	c := newTopicCounters()
	for i := range maxTopicSeries + 3 {
		c.add(fmt.Sprint("t", i), 1, 10)
	}
	c.add("t0", 1, 10)
	var b strings.Builder
	c.write(&b)
	samples, err := parsePrometheusText(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := sampleOf(samples, "keel_topic_messages_in_total", map[string]string{"topic": otherLabel}); v != 3 {
		t.Errorf("__other__ messages = %v, want 3", v)
	}
	if v, _ := sampleOf(samples, "keel_topic_bytes_in_total", map[string]string{"topic": "t0"}); v != 20 {
		t.Errorf("t0 bytes = %v, want 20", v)
	}
	if got := len(samples); got != 2*(maxTopicSeries+1) {
		t.Errorf("%d samples, want %d (the cap plus __other__, two families)", got, 2*(maxTopicSeries+1))
	}
}
