package indexhash

import (
	"context"

	"github.com/keelmq/keel/sdk/metricset"
)

// newMetrics registers x's series, named keel_index_hash_*, over the
// counters Status reports too.
func newMetrics(x *Index) *metricset.Set {
	s := metricset.New()
	counter := func(name, help string, v interface{ Load() int64 }) {
		s.CounterFunc("keel_index_hash_"+name, help, func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, f func() int64) {
		s.Gauge("keel_index_hash_"+name, help, func() float64 { return float64(f()) })
	}
	gauge("files", "Index files.", func() int64 { return int64(len(x.Files())) })
	gauge("entries", "Keys held by the index files.", func() int64 {
		var n int64
		for _, f := range x.Files() {
			n += int64(f.Entries)
		}
		return n
	})
	gauge("indexed_offset", "Commitlog offset below which every record is indexed.", func() int64 { i, _ := x.Offsets(); return i })
	gauge("durable_offset", "Commitlog offset below which every record is durably indexed.", func() int64 { _, d := x.Offsets(); return d })
	counter("records_total", "Records given to Index.", &x.st.records)
	counter("keys_total", "Keys added.", &x.st.keys)
	counter("rollbacks_skipped_total", "Transaction rollback records not indexed.", &x.st.rollbacks)
	counter("truncations_total", "Times the index was cut back for records it had passed (re-dispatch, log truncation).", &x.st.truncations)
	counter("truncated_keys_total", "Keys removed by cutting back.", &x.st.truncatedKeys)
	counter("queries_total", "Key queries.", &x.st.queries)
	counter("syncs_total", "Syncs that wrote something.", &x.st.syncs)
	counter("sync_failures_total", "Syncs that failed.", &x.st.syncFailures)
	counter("files_deleted_total", "Index files deleted (retention or cut back).", &x.st.filesDeleted)
	counter("resets_total", "Times an unusable index directory was discarded.", &x.st.resets)
	return s
}

// WriteMetrics implements sdk.MetricsWriter: Prometheus text exposition
// of the counters and gauges, named keel_index_hash_*.
func (x *Index) WriteMetrics(ctx context.Context) ([]byte, error) {
	return x.metrics.Bytes(), nil
}
