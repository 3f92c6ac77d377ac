package replication

import (
	"sort"
	"sync"
	"time"
)

// timeline remembers when the committed offset reached which value, to
// turn a replica's byte lag into seconds: the age of the oldest record it
// has not acknowledged.
type timeline struct {
	mu      sync.Mutex
	offs    []int64
	times   []time.Time
	lastRec time.Time
}

const timelineMax = 4096

func (t *timeline) record(off int64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.offs); n > 0 && (off <= t.offs[n-1] || now.Sub(t.lastRec) < time.Millisecond) {
		if off > t.offs[n-1] && now.Sub(t.lastRec) < time.Millisecond {
			t.offs[n-1] = off // coalesce bursts; keeps the older time (conservative)
		}
		return
	}
	if len(t.offs) >= timelineMax {
		t.offs = append(t.offs[:0], t.offs[timelineMax/2:]...)
		t.times = append(t.times[:0], t.times[timelineMax/2:]...)
	}
	t.offs = append(t.offs, off)
	t.times = append(t.times, now)
	t.lastRec = now
}

// lagSeconds is how long ago the first byte beyond ack was committed (0
// when the replica has everything), to within the sampling: bursts within
// a millisecond share one sample. A byte beyond ack was committed at or
// before the first sample beyond ack, and after the sample before that;
// the first is the estimate, because after an idle spell the sample
// before may be arbitrarily old, and a replica must not leave the in-sync
// set (Options.MaxLagTime) for the master's idleness.
func (t *timeline) lagSeconds(ack, committed int64, now time.Time) float64 {
	if ack >= committed {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := sort.Search(len(t.offs), func(i int) bool { return t.offs[i] > ack })
	if i == len(t.offs) {
		return 0
	}
	return max(0, now.Sub(t.times[i]).Seconds())
}
