package indexhash

import ()

// Offsets reports the index's progress: every record below indexed has
// been indexed, and every record below durable is durably indexed.
func (x *Index) Offsets() (indexed, durable int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.indexedEnd, x.durableEnd.Load()
}

// FileInfo describes one index file.
type FileInfo struct {
	Name           string `json:"name"`
	Entries        int    `json:"entries"`  // keys held
	Capacity       int    `json:"capacity"` // keys it can hold
	UsedSlots      int    `json:"used_slots"`
	BeginTimestamp int64  `json:"begin_timestamp"`
	EndTimestamp   int64  `json:"end_timestamp"`
	BeginPhyOffset int64  `json:"begin_phy_offset"`
	EndPhyOffset   int64  `json:"end_phy_offset"`
}

// Files describes the index files, oldest first.
func (x *Index) Files() []FileInfo {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]FileInfo, 0, len(x.files))
	for _, f := range x.files {
		out = append(out, FileInfo{
			Name: f.name, Entries: int(f.h.count - 1), Capacity: int(f.entries - 1), UsedSlots: int(f.h.usedSlots),
			BeginTimestamp: f.h.beginTs, EndTimestamp: f.h.endTs, BeginPhyOffset: f.h.beginPhy, EndPhyOffset: f.h.endPhy,
		})
	}
	return out
}
