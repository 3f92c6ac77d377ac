package timer

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

func TestHandoffTake(t *testing.T) {
	var h handoff
	if got := h.take(0, make([]handoffEntry, 0, 4)); len(got) != 0 {
		t.Fatalf("empty ring gave %v", got)
	}
	for _, q := range []int64{0, 1, 2, 4} {
		h.put(core.AppendResult{QueueOffset: q, PhysOffset: 100 * q, Size: 10}, 1000+q)
	}
	got := h.take(0, make([]handoffEntry, 0, 8))
	if len(got) != 3 || got[2].phys != 200 || got[2].due != 1002 || got[2].size != 10 {
		t.Fatalf("take from 0 = %+v, want offsets 0..2 (3 is missing)", got)
	}
	if got := h.take(1, make([]handoffEntry, 0, 1)); len(got) != 1 || got[0].phys != 100 {
		t.Fatalf("take one from 1 = %+v", got)
	}
	if got := h.take(3, make([]handoffEntry, 0, 8)); len(got) != 0 {
		t.Fatalf("take from the gap at 3 = %+v", got)
	}
	// An entry a whole ring later replaces the earlier one: the earlier
	// offset is then missing (read from the log), never answered wrongly.
	h.put(core.AppendResult{QueueOffset: 4 + handoffSize, PhysOffset: 7}, 9)
	if got := h.take(4, make([]handoffEntry, 0, 8)); len(got) != 0 {
		t.Fatalf("overwritten offset 4 = %+v", got)
	}
	if got := h.take(4+handoffSize, make([]handoffEntry, 0, 8)); len(got) != 1 || got[0].phys != 7 {
		t.Fatalf("take from 4+ring = %+v", got)
	}
}

// countingLog counts the timer records the enqueue loop reads back.
type countingLog struct {
	*core.Store
	read atomic.Int64
}

func (l *countingLog) GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(int64) bool) (core.GetResult, error) {
	res, err := l.Store.GetMessages(topic, queueID, offset, maxCount, maxBytes, filter)
	if topic == Topic {
		l.read.Add(int64(len(res.Sizes)))
	}
	return res, err
}

// TestServiceIndexesHandedOff: timers reported with Appended are indexed
// without being read back from the log, and those not reported (every
// fifth) are read from it; each is delivered once and none early.
func TestServiceIndexesHandedOff(t *testing.T) {
	st, err := core.Open(core.Options{Dir: t.TempDir(), FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lg := &countingLog{Store: st}
	svc := newService(t, st, filepath.Join(t.TempDir(), "timer"), &memProgress{m: map[int32]int64{}})
	svc.cfg.Log = lg
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	const n = 200
	dues := map[string]int64{}
	for i := range n {
		id := fmt.Sprintf("h%d", i)
		m := &record.Message{Topic: "T", Body: []byte(id), Properties: record.EncodeProperties(map[string]string{
			PropertyDelayMS: fmt.Sprint(300 + i*3), record.PropertyUniqKey: id,
		})}
		due, err := svc.Rule().Rewrite(m, time.Now())
		if err != nil || due == 0 {
			t.Fatalf("rewrite %s: %d, %v", id, due, err)
		}
		res, err := st.AppendBatch([]*record.Message{m}, nil)
		if err != nil {
			t.Fatal(err)
		}
		dues[id] = due
		if i%5 == 4 {
			svc.Notify()
			time.Sleep(5 * time.Millisecond) // let the loop meet the gap
			continue
		}
		svc.Appended(res, []int64{due})
	}
	deadline := time.Now().Add(5 * time.Second)
	for got := deliveredT(t, st); ; got = deliveredT(t, st) {
		if len(got) == n || time.Now().After(deadline) {
			for id, due := range dues {
				if ts := got[id]; len(ts) != 1 || ts[0] < due {
					t.Errorf("%s due %d: delivered at %v, want once, not before due", id, due, ts)
				}
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := lg.read.Load(); r >= n/2 {
		t.Errorf("the enqueue loop read %d of %d timer records back from the log; want the handed-off ones taken from the hand-off", r, n)
	}
}
