package indexhash

import (
	"context"
	"math"

	"github.com/keelmq/keel/sdk"
)

// Query implements sdk.Indexer: the commitlog offsets of the entries for
// q.Topic#q.Key whose store time may lie in [q.Begin, q.End], newest
// first, at most min(q.Max, Config.MaxQuery) (q.Max <= 0 asks for none).
// q.End == 0 means no upper bound.
//
// Candidates, not answers: entries are compared by hash only, so the
// result may hold offsets of other keys; entries keep their time to the
// second (RocketMQ's timeDiff), so it may hold records up to 999 ms
// before q.Begin; the same offset comes twice when a record lists a key
// twice; and offsets may point below the commitlog minimum (records
// already deleted). The host filters all of these by reading the records
// (sdk.Indexer). What it does not do is miss a record: every indexed record of
// that key stored in [q.Begin, q.End] is returned unless Max offsets newer
// than it are. Like RocketMQ, the walk stops at entries older than
// q.Begin, which assumes store timestamps do not go backwards. An empty
// topic or key matches nothing.
func (x *Index) Query(ctx context.Context, q sdk.Query) ([]int64, error) {
	if q.Topic == "" || q.Key == "" || q.Max <= 0 {
		return nil, nil
	}
	limit := min(q.Max, x.cfg.MaxQuery)
	begin, end := q.Begin, q.End
	if end == 0 {
		end = math.MaxInt64
	}
	if end < begin {
		return nil, nil
	}
	h := keyHash(q.Topic, q.Key)
	x.st.queries.Add(1)
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.state.Load() != stateOpen {
		return nil, x.errState("query")
	}
	var out []int64
	for i := len(x.files) - 1; i >= 0 && len(out) < limit; i-- {
		f := x.files[i]
		if f.empty() {
			continue
		}
		if f.h.beginTs <= end {
			out = f.lookup(out, h, begin, end, limit)
		}
		if f.h.beginTs+999 < begin {
			break // older files hold only older seconds (RocketMQ stops at beginTs < begin)
		}
	}
	return out, nil
}
