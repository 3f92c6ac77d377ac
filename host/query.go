package host

import (
	"context"
	"fmt"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/sdk"
)

// QueryByKey returns the records of topic whose KEYS or UNIQ_KEY contain
// key, newest first, at most maxNum, stored in [begin, end] (Unix ms; 0 =
// unbounded). It needs an index plugin, and refuses the topics whose
// records are not indexed (parkedTopics), with remoting.ErrNotSupported.
func (n *Node) QueryByKey(ctx context.Context, topic, key string, maxNum int, begin, end int64) ([][]byte, error) {
	if n.indexer == nil {
		return nil, fmt.Errorf("%w: no index plugin is loaded (profile [index] plugin = \"none\")", remoting.ErrNotSupported)
	}
	if err := unindexedQuery(topic); err != nil {
		return nil, err
	}
	if maxNum <= 0 || maxNum > 64 {
		maxNum = 64
	}
	offs, err := n.indexer.Query(ctx, sdk.Query{Topic: topic, Key: key, Begin: begin, End: end, Max: maxNum})
	if err != nil {
		return nil, fmt.Errorf("index query: %w", err)
	}
	var out [][]byte
	for _, off := range offs {
		rec, err := n.cache.readRecord(n.store, off)
		if err != nil {
			continue // removed by retention, or a stale index entry
		}
		r, err := record.Decode(rec)
		if err != nil || r.Topic != topic {
			continue
		}
		if !recordHasKey(r, key) {
			continue
		}
		out = append(out, rec)
		if len(out) == maxNum {
			break
		}
	}
	return out, nil
}

func recordHasKey(r *record.Record, key string) bool {
	if u, ok := record.GetProperty(r.Properties, record.PropertyUniqKey); ok && u == key {
		return true
	}
	if ks, ok := record.GetProperty(r.Properties, record.PropertyKeys); ok {
		for k := range record.IndexKeys(ks) {
			if k == key {
				return true
			}
		}
	}
	return false
}
