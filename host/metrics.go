package host

import (
	"context"
	"fmt"
	"io"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/sdk"
)

// metrics is the node's metric set (VictoriaMetrics/metrics). Gauges over
// store positions and plugin state are computed at scrape time.
type nodeMetrics struct {
	set *vm.Set

	appendMsgs    *vm.Counter
	appendBytes   *vm.Counter
	appendErrors  *vm.Counter
	appendLatency *vm.Histogram
	ackLatency    *vm.Histogram
	pullMsgs      *vm.Counter
	flushes       *vm.Counter
	flushBytes    *vm.Counter
	flushLatency  *vm.Histogram

	pluginCrashes  *vm.Counter
	pluginRestarts *vm.Counter

	// corruptReads counts distinct damaged records reads met (each once,
	// however often a consumer retries it); readFaults remembers which.
	corruptReads *vm.Counter
	readFaults   readFaults

	acks map[remoting.AckStatus]*vm.Counter

	// topicsIn counts what sends stored, per topic (metrics_topics.go).
	topicsIn *topicCounters
}

var ackNames = map[remoting.AckStatus]string{
	remoting.AckOK:                "SEND_OK",
	remoting.AckFlushDiskTimeout:  "FLUSH_DISK_TIMEOUT",
	remoting.AckFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	remoting.AckSlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
}

func newMetrics(n *Node) *nodeMetrics {
	s := vm.NewSet()
	m := &nodeMetrics{
		set:            s,
		appendMsgs:     s.NewCounter("keel_append_messages_total"),
		appendBytes:    s.NewCounter("keel_append_bytes_total"),
		appendErrors:   s.NewCounter("keel_append_errors_total"),
		appendLatency:  s.NewHistogram("keel_append_duration_seconds"),
		ackLatency:     s.NewHistogram("keel_ack_duration_seconds"),
		pullMsgs:       s.NewCounter("keel_pull_messages_total"),
		flushes:        s.NewCounter("keel_flush_total"),
		flushBytes:     s.NewCounter("keel_flush_bytes_total"),
		flushLatency:   s.NewHistogram("keel_flush_duration_seconds"),
		pluginCrashes:  s.NewCounter("keel_plugin_crashes_total"),
		pluginRestarts: s.NewCounter("keel_plugin_restarts_total"),
		corruptReads:   s.NewCounter("keel_read_corrupt_records_total"),
		acks:           map[remoting.AckStatus]*vm.Counter{},
		topicsIn:       newTopicCounters(),
	}
	for st, name := range ackNames {
		m.acks[st] = s.NewCounter(fmt.Sprintf(`keel_acks_total{status=%q}`, name))
	}
	pos := func(f func() int64) func() float64 {
		return func() float64 {
			if n.store == nil {
				return 0
			}
			return float64(f())
		}
	}
	s.NewGauge("keel_offset_min", pos(func() int64 { return n.store.Positions().Min }))
	s.NewGauge("keel_offset_committed", pos(func() int64 { return n.store.Positions().Committed }))
	s.NewGauge("keel_offset_flushed", pos(func() int64 { return n.store.Positions().Flushed }))
	s.NewGauge("keel_offset_dispatched", pos(func() int64 { return n.store.Positions().Dispatched }))
	s.NewGauge("keel_offset_confirm", pos(func() int64 { return n.store.Positions().Confirm }))
	s.NewGauge("keel_dispatch_lag_bytes", pos(func() int64 { p := n.store.Positions(); return p.Committed - p.Dispatched }))
	s.NewGauge("keel_flush_lag_bytes", pos(func() int64 { p := n.store.Positions(); return p.Committed - p.Flushed }))
	s.NewGauge("keel_store_bytes", pos(func() int64 { p := n.store.Positions(); return p.Committed - p.Min }))
	s.NewGauge("keel_disk_used_ratio", func() float64 {
		if n.store == nil {
			return 0
		}
		return n.store.DiskUsedRatio()
	})
	s.NewGauge("keel_read_cache_hits_total", func() float64 { h, _ := n.cache.stats(); return float64(h) })
	s.NewGauge("keel_read_cache_misses_total", func() float64 { _, m := n.cache.stats(); return float64(m) })
	registerStoreMetrics(s, n)
	s.NewGauge("keel_replicas_in_sync", func() float64 {
		if n.host == nil {
			return 0
		}
		return float64(n.host.InSync())
	})
	return m
}

func (m *nodeMetrics) ackStatus(st remoting.AckStatus) *vm.Counter { return m.acks[st] }

func (m *nodeMetrics) onFlush(d time.Duration, bytes int64) {
	m.flushes.Inc()
	m.flushBytes.Add(int(bytes))
	m.flushLatency.Update(d.Seconds())
}

// write writes the node's metrics, per-topic and per-group series, the Go
// runtime and process series (VictoriaMetrics/metrics' go_* and process_*,
// open and max file descriptors included), per-replica and per-plugin
// series, and each plugin's own metrics (collected now, external ones over
// gRPC).
func (m *nodeMetrics) write(w io.Writer, n *Node) {
	m.set.WritePrometheus(w)
	m.topicsIn.write(w)
	writeTopicAndLagMetrics(w, n)
	vm.WriteProcessMetrics(w)
	vm.WriteFDMetrics(w)
	n.writeControllerMetrics(w)
	writeClusterMetrics(w, n)
	if n.host != nil {
		for _, r := range n.host.Replication().Replicas {
			fmt.Fprintf(w, "keel_replica_lag_bytes{replica=%q} %d\n", r.ID, r.LagBytes)
			fmt.Fprintf(w, "keel_replica_lag_seconds{replica=%q} %g\n", r.ID, r.LagSeconds)
			fmt.Fprintf(w, "keel_replica_in_sync{replica=%q} %d\n", r.ID, b2i(r.InSync))
		}
	}
	for _, lp := range n.plugins {
		st, _ := lp.getState()
		for _, s := range []string{"configured", stateRunning, stateDegraded, stateStopped} {
			fmt.Fprintf(w, "keel_plugin_state{kind=%q,name=%q,state=%q} %d\n", lp.kind, lp.name, s, b2i(st == s))
		}
		if mw, ok := lp.p.(sdk.MetricsWriter); ok && st == stateRunning {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			b, err := mw.WriteMetrics(ctx)
			cancel()
			if err == nil {
				w.Write(b)
				if len(b) > 0 && b[len(b)-1] != '\n' {
					io.WriteString(w, "\n")
				}
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
