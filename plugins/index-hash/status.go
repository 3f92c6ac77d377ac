package indexhash

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// Status is what Status reports (as JSON).
type Status struct {
	Dir       string `json:"dir"`
	State     string `json:"state"`
	HashSlots int    `json:"hash_slots"`
	// IndexedOffset: every record below it is indexed; DurableOffset:
	// every record below it is durably indexed.
	IndexedOffset int64      `json:"indexed_offset"`
	DurableOffset int64      `json:"durable_offset"`
	Files         []FileInfo `json:"files"`
	Entries       int64      `json:"entries"`
	Records       int64      `json:"records_indexed"`
	Keys          int64      `json:"keys_indexed"`
	Rollbacks     int64      `json:"rollbacks_skipped"`
	Truncations   int64      `json:"truncations"`
	TruncatedKeys int64      `json:"truncated_keys"`
	Recoveries    int64      `json:"recoveries"`
	Resets        int64      `json:"resets"`
	Queries       int64      `json:"queries"`
	Syncs         int64      `json:"syncs"`
	SyncFailures  int64      `json:"sync_failures"`
	FilesCreated  int64      `json:"files_created"`
	FilesDeleted  int64      `json:"files_deleted"`
	Cache         CacheStats `json:"cache"`
}

// Stats returns the index's state and counters.
func (x *Index) Stats() Status {
	s := Status{
		Dir: x.dir, HashSlots: x.cfg.HashSlots,
		Files:         x.Files(),
		Records:       x.st.records.Load(),
		Keys:          x.st.keys.Load(),
		Rollbacks:     x.st.rollbacks.Load(),
		Truncations:   x.st.truncations.Load(),
		TruncatedKeys: x.st.truncatedKeys.Load(),
		Recoveries:    x.st.recoveries.Load(),
		Resets:        x.st.resets.Load(),
		Queries:       x.st.queries.Load(),
		Syncs:         x.st.syncs.Load(),
		SyncFailures:  x.st.syncFailures.Load(),
		FilesCreated:  x.st.filesCreated.Load(),
		FilesDeleted:  x.st.filesDeleted.Load(),
		Cache:         x.cache.stats(),
	}
	s.State = [...]string{"unconfigured", "open", "stopped"}[x.state.Load()]
	s.IndexedOffset, s.DurableOffset = x.Offsets()
	for _, f := range s.Files {
		s.Entries += int64(f.Entries)
	}
	return s
}

// Status implements sdk.StatusReporter: Stats as a JSON object.
func (x *Index) Status(ctx context.Context) ([]byte, error) {
	return json.Marshal(x.Stats())
}

// WriteMetrics implements sdk.MetricsWriter: Prometheus text exposition
// of the counters and gauges, named keel_index_hash_*.
func (x *Index) WriteMetrics(ctx context.Context) ([]byte, error) {
	s := x.Stats()
	var b bytes.Buffer
	metric := func(name, typ, help string, v any) {
		fmt.Fprintf(&b, "# HELP keel_index_hash_%s %s\n# TYPE keel_index_hash_%s %s\nkeel_index_hash_%s %v\n", name, help, name, typ, name, v)
	}
	metric("cache_hits_total", "counter", "Read cache lookups that found the record.", s.Cache.Hits)
	metric("cache_misses_total", "counter", "Read cache lookups that read the commitlog.", s.Cache.Misses)
	metric("cache_bytes", "gauge", "Approximate bytes held by the read cache.", s.Cache.Bytes)
	metric("cache_max_bytes", "gauge", "Configured read cache size (0 = off).", s.Cache.MaxBytes)
	metric("cache_sets_dropped_total", "counter", "Records offered to the read cache and dropped or refused.", s.Cache.SetsDropped)
	metric("cache_evictions_total", "counter", "Records evicted from the read cache.", s.Cache.Evictions)
	metric("files", "gauge", "Index files.", len(s.Files))
	metric("entries", "gauge", "Keys held by the index files.", s.Entries)
	metric("indexed_offset", "gauge", "Commitlog offset below which every record is indexed.", s.IndexedOffset)
	metric("durable_offset", "gauge", "Commitlog offset below which every record is durably indexed.", s.DurableOffset)
	metric("records_total", "counter", "Records given to Index.", s.Records)
	metric("keys_total", "counter", "Keys added.", s.Keys)
	metric("rollbacks_skipped_total", "counter", "Transaction rollback records not indexed.", s.Rollbacks)
	metric("truncations_total", "counter", "Times the index was cut back for records it had passed (re-dispatch, log truncation).", s.Truncations)
	metric("truncated_keys_total", "counter", "Keys removed by cutting back.", s.TruncatedKeys)
	metric("queries_total", "counter", "Key queries.", s.Queries)
	metric("syncs_total", "counter", "Syncs that wrote something.", s.Syncs)
	metric("sync_failures_total", "counter", "Syncs that failed.", s.SyncFailures)
	metric("files_deleted_total", "counter", "Index files deleted (retention or cut back).", s.FilesDeleted)
	metric("resets_total", "counter", "Times an unusable index directory was discarded.", s.Resets)
	return b.Bytes(), nil
}
