package indexhash

import (
	"context"
	"encoding/json"
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
