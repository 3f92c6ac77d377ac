package host

import (
	"fmt"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/keelmq/keel/core"
)

// readCache caches whole records by physical offset for the random-access
// read paths: messages viewed by id and candidates of key queries. The
// tail that consumers read sequentially is served by the page cache and
// does not go through it. Sized by the profile's store.read_cache (bytes,
// 0 = off).
//
// ristretto's Set is asynchronous and may drop an admission under load: a
// miss after a Set is normal, so nothing here relies on a Set being
// visible. Entries are tagged with the store's truncation generation, and
// offsets below the log minimum are never served, so a record replaced by
// replication truncation or removed by retention is not returned.
type readCache struct {
	c *ristretto.Cache[int64, cachedRecord]
}

type cachedRecord struct {
	gen int64
	rec []byte
}

func newReadCache(maxBytes int64) (*readCache, error) {
	if maxBytes <= 0 {
		return nil, nil
	}
	items := max(maxBytes/512, 100) // ~10 counters per item of ~512 B
	c, err := ristretto.NewCache(&ristretto.Config[int64, cachedRecord]{
		NumCounters: 10 * items,
		MaxCost:     maxBytes,
		BufferItems: 64,
		Metrics:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("read cache of %d bytes: %w", maxBytes, err)
	}
	return &readCache{c: c}, nil
}

// readRecord returns the record at off, from the cache when it can.
func (rc *readCache) readRecord(s *core.Store, off int64) ([]byte, error) {
	if rc == nil {
		return s.ReadRecord(off)
	}
	gen := s.TruncateGeneration()
	if v, ok := rc.c.Get(off); ok && v.gen == gen && off >= s.Positions().Min {
		return v.rec, nil
	}
	rec, err := s.ReadRecord(off)
	if err != nil {
		return nil, err
	}
	rc.c.Set(off, cachedRecord{gen: gen, rec: rec}, int64(len(rec)))
	return rec, nil
}

func (rc *readCache) stats() (hits, misses uint64) {
	if rc == nil {
		return 0, 0
	}
	return rc.c.Metrics.Hits(), rc.c.Metrics.Misses()
}

func (rc *readCache) close() {
	if rc != nil {
		rc.c.Close()
	}
}
