package indexhash

import (
	"context"
	"errors"
	"fmt"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk"
)

// Message is a record found by key or id.
type Message struct {
	// Offset is the record's commitlog offset.
	Offset int64
	// Data is the whole stored record (the RocketMQ wire record). It may
	// be shared with the read cache: callers must not modify it.
	Data []byte
	// Record is Data decoded; its Body and Properties alias Data.
	Record *record.Record
}

// ReadRecord returns the record at commitlog offset off through the read
// cache: a hit returns the cached bytes, a miss reads host.ReadRecord and
// offers the result to the cache (which may drop it). The returned slice
// must not be modified. Errors are host.ReadRecord's (sdk.ErrOffset for an
// offset outside the log or not on a record boundary). A nil x reads
// without a cache.
//
// A record cached before the log was cut back and written again is not
// returned once the index has seen the cut (re-dispatch at a lower
// offset); between the cut and that moment a stale record can be served.
func (x *Index) ReadRecord(ctx context.Context, host sdk.Host, off int64) ([]byte, error) {
	var rc *readCache
	var gen uint64
	if x != nil {
		rc, gen = x.cache, x.gen.Load()
		if b, ok := rc.get(off, gen); ok {
			return b, nil
		}
	}
	b, err := host.ReadRecord(ctx, off)
	if err != nil {
		return nil, err
	}
	rc.set(off, gen, b)
	return b, nil
}

// QueryMessages answers a key query for the host: it asks idx for
// candidate offsets (sdk.Indexer.Query), reads each record (through the
// read cache when idx is an *Index) and keeps those whose topic is
// q.Topic, whose UNIQ_KEY or one of whose KEYS is q.Key, and whose store
// timestamp is in [q.Begin, q.End] (q.End == 0: unbounded). This filters
// out hash collisions and entries of records that have left the log
// (below the commitlog minimum, or cut off). The result is newest first,
// each record once, at most as many as idx returned offsets. Errors are
// idx's and host's, other than sdk.ErrOffset for a record that is gone.
func QueryMessages(ctx context.Context, host sdk.Host, idx sdk.Indexer, q sdk.Query) ([]Message, error) {
	offs, err := idx.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("query index for %s#%s: %w", q.Topic, q.Key, err)
	}
	if len(offs) == 0 {
		return nil, nil
	}
	pos, err := host.Positions(ctx)
	if err != nil {
		return nil, fmt.Errorf("query %s#%s: positions: %w", q.Topic, q.Key, err)
	}
	x, _ := idx.(*Index)
	end := q.End
	if end == 0 {
		end = 1<<63 - 1
	}
	var out []Message
	seen := make(map[int64]bool, len(offs))
	for _, off := range offs {
		if seen[off] || off < pos.Min || off >= pos.Committed {
			continue
		}
		seen[off] = true
		b, err := x.ReadRecord(ctx, host, off)
		if errors.Is(err, sdk.ErrOffset) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("query %s#%s: read record at %d: %w", q.Topic, q.Key, off, err)
		}
		r, err := record.Decode(b)
		if err != nil || r.PhysOffset != off {
			continue // not the record the entry was made for
		}
		if r.Topic != q.Topic || r.StoreTimestamp < q.Begin || r.StoreTimestamp > end || !hasKey(r, q.Key) {
			continue
		}
		out = append(out, Message{Offset: off, Data: b, Record: r})
	}
	return out, nil
}

// hasKey reports whether r's UNIQ_KEY or KEYS holds key.
func hasKey(r *record.Record, key string) bool {
	if u, ok := record.GetProperty(r.Properties, record.PropertyUniqKey); ok && u == key {
		return true
	}
	keys, _ := record.GetProperty(r.Properties, record.PropertyKeys)
	for k := range record.IndexKeys(keys) {
		if k == key {
			return true
		}
	}
	return false
}

// ByID returns the record an offset message id (RocketMQ's msgId:
// store host and commitlog offset, record.OffsetMsgID) names. No index is
// needed; idx, when an *Index, lends its read cache (nil or any other
// Indexer reads directly). It does not check that the id's store host is
// this broker: compare Message.Record.StoreHost if that matters. Errors
// wrap record.ErrBadMsgID for a malformed id and sdk.ErrOffset when no
// record starts at that offset (deleted, cut off or never written).
func ByID(ctx context.Context, host sdk.Host, idx sdk.Indexer, id string) (Message, error) {
	_, off, err := record.ParseOffsetMsgID(id)
	if err != nil {
		return Message{}, fmt.Errorf("message id %q: %w", id, err)
	}
	pos, err := host.Positions(ctx)
	if err != nil {
		return Message{}, fmt.Errorf("message id %q: positions: %w", id, err)
	}
	if off < pos.Min || off >= pos.Committed {
		return Message{}, fmt.Errorf("message id %q: offset %d outside the log [%d,%d): %w", id, off, pos.Min, pos.Committed, sdk.ErrOffset)
	}
	x, _ := idx.(*Index)
	b, err := x.ReadRecord(ctx, host, off)
	if err != nil {
		return Message{}, fmt.Errorf("message id %q: %w", id, err)
	}
	r, err := record.Decode(b)
	if err != nil {
		return Message{}, fmt.Errorf("message id %q: record at %d: %w: %w", id, off, sdk.ErrOffset, err)
	}
	if r.PhysOffset != off {
		return Message{}, fmt.Errorf("message id %q: the record at %d claims offset %d: %w", id, off, r.PhysOffset, sdk.ErrOffset)
	}
	return Message{Offset: off, Data: b, Record: r}, nil
}
