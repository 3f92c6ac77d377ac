package indexhash

import (
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
)

// cacheItemOverhead is added to a record's length as its cost: the map
// entry, the value header and ristretto's bookkeeping, roughly.
const cacheItemOverhead = 64

// readCache caches whole records by commitlog offset for the random-access
// read paths. Values are tagged with the index's truncation generation: a
// value cached before the log was cut back is never returned after.
//
// Ristretto's Set is asynchronous and may drop or refuse an admission, so
// nothing relies on a Set being visible; a miss just reads the log again.
type readCache struct {
	c            *ristretto.Cache[int64, cachedRecord]
	maxBytes     int64
	hits, misses atomic.Int64
	stale        atomic.Int64
}

type cachedRecord struct {
	gen  uint64
	data []byte
}

// newReadCache returns a cache of maxBytes, or a disabled one for 0.
func newReadCache(maxBytes int64) (*readCache, error) {
	rc := &readCache{maxBytes: maxBytes}
	if maxBytes <= 0 {
		return rc, nil
	}
	// Ristretto wants ~10 counters per item it may hold; assume records of
	// about 1 KiB.
	items := max(maxBytes/1024, 100)
	c, err := ristretto.NewCache(&ristretto.Config[int64, cachedRecord]{
		NumCounters: 10 * items,
		MaxCost:     maxBytes,
		BufferItems: 64,
		Metrics:     true,
	})
	if err != nil {
		return nil, err
	}
	rc.c = c
	return rc, nil
}

func (rc *readCache) enabled() bool { return rc != nil && rc.c != nil }

// get returns the record at off cached under generation gen.
func (rc *readCache) get(off int64, gen uint64) ([]byte, bool) {
	if !rc.enabled() {
		return nil, false
	}
	v, ok := rc.c.Get(off)
	if ok && v.gen != gen {
		rc.stale.Add(1)
		rc.c.Del(off)
		ok = false
	}
	if !ok {
		rc.misses.Add(1)
		return nil, false
	}
	rc.hits.Add(1)
	return v.data, true
}

// set offers a record to the cache; it may never become visible.
func (rc *readCache) set(off int64, gen uint64, data []byte) {
	if !rc.enabled() {
		return
	}
	rc.c.Set(off, cachedRecord{gen: gen, data: data}, int64(len(data))+cacheItemOverhead)
}

// wait blocks until earlier Sets have been applied or dropped (tests).
func (rc *readCache) wait() {
	if rc.enabled() {
		rc.c.Wait()
	}
}

func (rc *readCache) close() {
	if rc.enabled() {
		rc.c.Close()
	}
}

// CacheStats is the read cache's activity.
type CacheStats struct {
	Enabled  bool  `json:"enabled"`
	MaxBytes int64 `json:"max_bytes"`
	// Hits and Misses count lookups; a miss reads the commitlog.
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// Bytes is the cost currently admitted (records plus overhead).
	Bytes int64 `json:"bytes"`
	// SetsDropped counts offers ristretto dropped (buffers full) or its
	// admission policy rejected.
	SetsDropped int64 `json:"sets_dropped"`
	// Evictions counts records evicted to make room.
	Evictions int64 `json:"evictions"`
}

func (rc *readCache) stats() CacheStats {
	s := CacheStats{}
	if rc == nil {
		return s
	}
	s.Enabled, s.MaxBytes = rc.enabled(), rc.maxBytes
	s.Hits, s.Misses = rc.hits.Load(), rc.misses.Load()
	if rc.enabled() {
		m := rc.c.Metrics
		s.Bytes = int64(m.CostAdded()) - int64(m.CostEvicted())
		s.SetsDropped = int64(m.SetsDropped() + m.SetsRejected())
		s.Evictions = int64(m.KeysEvicted())
	}
	return s
}
