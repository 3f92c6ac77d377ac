package schedule

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// memOffsets is an Offsets whose persisted copy a test can take back, as a
// crash would leave it. It also checks that the service never lowers an
// offset.
type memOffsets struct {
	t         *testing.T
	mu        sync.Mutex
	live      map[int32]int64
	persisted map[int32]int64
}

func newMemOffsets(t *testing.T, from map[int32]int64) *memOffsets {
	o := &memOffsets{t: t, live: map[int32]int64{}, persisted: map[int32]int64{}}
	maps.Copy(o.live, from)
	maps.Copy(o.persisted, from)
	return o
}

func (o *memOffsets) Get(level int32) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.live[level]
	return v, ok
}

func (o *memOffsets) Set(level int32, off int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if off < o.live[level] {
		o.t.Errorf("level %d offset lowered from %d to %d", level, o.live[level], off)
	}
	o.live[level] = off
	return nil
}

func (o *memOffsets) Persist() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.persisted = maps.Clone(o.live)
	return nil
}

func (o *memOffsets) crashed() map[int32]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.persisted)
}

// env is a real store with a delivery service over it.
type env struct {
	t      *testing.T
	store  *core.Store
	levels Levels
	svc    *Service
	offs   *memOffsets

	mu     sync.Mutex
	sent   map[string]sentMsg // by UNIQ_KEY
	sentAt []string           // UNIQ_KEYs in send order
}

type sentMsg struct {
	level       int32
	queueOffset int64 // in the schedule queue
	due         int64 // store timestamp + delay, Unix ms
}

func newEnv(t *testing.T, levels Levels) *env {
	t.Helper()
	st, err := core.Open(core.Options{Dir: t.TempDir(), FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, store: st, levels: levels, sent: map[string]sentMsg{}}
	e.start(nil)
	return e
}

func (e *env) start(from map[int32]int64) {
	e.offs = newMemOffsets(e.t, from)
	e.svc = New(Config{
		Levels:  e.levels,
		Log:     e.store,
		Offsets: e.offs,
		Append: func(msgs []*record.Message) ([]core.AppendResult, error) {
			return e.store.AppendBatch(msgs, nil)
		},
		Durable: func(end int64, done func(bool)) { e.store.OnFlushed(end, 5*time.Second, done) },
		Flush:   func() error { _, err := e.store.Flush(); return err },
		Logger:  slog.New(slog.DiscardHandler),
	})
	e.svc.Start()
}

// send stores one message with DELAY=level through the rewrite.
func (e *env) send(id string, level int32) {
	e.t.Helper()
	m := &record.Message{Topic: "T", Body: []byte(id), Properties: record.EncodeProperties(map[string]string{
		record.PropertyDelayLevel: fmt.Sprint(level), record.PropertyUniqKey: id,
	})}
	lvl, err := e.levels.Rewrite(m)
	if err != nil || lvl != level {
		e.t.Fatalf("rewrite %s: %d, %v", id, lvl, err)
	}
	res, err := e.store.AppendBatch([]*record.Message{m}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.sent[id] = sentMsg{level: level, queueOffset: res[0].QueueOffset, due: res[0].StoreTimestamp + e.levels.Delay(level).Milliseconds()}
	e.sentAt = append(e.sentAt, id)
	e.mu.Unlock()
	e.svc.Notify(level, res[0].End())
}

type delivery struct {
	storeTs int64
	props   map[string]string
}

// delivered reads topic T queue 0: every delivery, by UNIQ_KEY.
func (e *env) delivered() map[string][]delivery {
	e.t.Helper()
	out := map[string][]delivery{}
	for off := int64(0); ; {
		res, err := e.store.GetMessages("T", 0, off, 256, 1<<20, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		if res.Status != core.Found {
			return out
		}
		data := res.Data
		for _, n := range res.Sizes {
			rec, err := record.Decode(data[:n])
			if err != nil {
				e.t.Fatal(err)
			}
			data = data[n:]
			p, _ := record.ParseProperties(rec.Properties)
			out[p[record.PropertyUniqKey]] = append(out[p[record.PropertyUniqKey]], delivery{rec.StoreTimestamp, p})
		}
		off = res.NextOffset
	}
}

// waitAll waits until every sent message was delivered at least once.
func (e *env) waitAll(d time.Duration) map[string][]delivery {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := e.delivered()
		e.mu.Lock()
		missing := 0
		for id := range e.sent {
			if len(got[id]) == 0 {
				missing++
			}
		}
		e.mu.Unlock()
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d of %d delayed messages not delivered within %s", missing, len(e.sent), d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServiceDeliversWhenDue(t *testing.T) {
	e := newEnv(t, Levels{150 * time.Millisecond, 400 * time.Millisecond})
	for i := range 20 {
		e.send(fmt.Sprintf("m%02d", i), int32(i%2+1))
	}
	got := e.waitAll(5 * time.Second)
	e.svc.Stop()
	for id, s := range e.sent {
		d := got[id]
		if len(d) != 1 {
			t.Errorf("%s delivered %d times without a crash, want once", id, len(d))
		}
		if d[0].storeTs < s.due {
			t.Errorf("%s delivered at %d, %d ms before due", id, d[0].storeTs, s.due-d[0].storeTs)
		}
		if late := d[0].storeTs - s.due; late > 500 {
			t.Errorf("%s delivered %d ms after due", id, late)
		}
		if _, ok := d[0].props[record.PropertyDelayLevel]; ok {
			t.Errorf("%s delivered with DELAY", id)
		}
		if d[0].props[record.PropertyRealTopic] != "T" || d[0].props[record.PropertyRealQueueID] != "0" {
			t.Errorf("%s: REAL_TOPIC/REAL_QID %v", id, d[0].props)
		}
	}
	// Stop persisted every level's offset: the end of its queue.
	p := e.offs.crashed()
	for level := int32(1); level <= 2; level++ {
		if want := e.store.MaxQueueOffset(Topic, QueueID(level)); p[level] != want {
			t.Errorf("level %d persisted offset %d, want %d", level, p[level], want)
		}
	}
}

// TestServiceCrashModel drives the service with random sends and random
// crashes (halt: no drain, no persist; the offsets go back to the last
// persisted copy) against a model of the contract: every message is
// delivered, never before due, and again only if its schedule offset was
// not yet persisted at a crash.
func TestServiceCrashModel(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	e := newEnv(t, Levels{50 * time.Millisecond, 120 * time.Millisecond, 200 * time.Millisecond})
	type crash struct{ persisted map[int32]int64 }
	var crashes []crash
	n := 0
	for round := range 6 {
		for range rng.Intn(30) + 5 {
			e.send(fmt.Sprintf("r%d-%03d", round, n), int32(rng.Intn(3)+1))
			n++
			if rng.Intn(4) == 0 {
				time.Sleep(time.Duration(rng.Intn(40)) * time.Millisecond)
			}
		}
		time.Sleep(time.Duration(rng.Intn(250)) * time.Millisecond)
		e.svc.halt()
		c := crash{e.offs.crashed()}
		crashes = append(crashes, c)
		e.start(c.persisted)
	}
	got := e.waitAll(10 * time.Second)
	e.svc.Stop()
	for id, s := range e.sent {
		d := got[id]
		for _, x := range d {
			if x.storeTs < s.due {
				t.Errorf("%s delivered %d ms before due", id, s.due-x.storeTs)
			}
		}
		allowed := 1
		for _, c := range crashes {
			if s.queueOffset >= c.persisted[s.level] {
				allowed++ // not yet persisted delivered at that crash
			}
		}
		if len(d) > allowed {
			t.Errorf("%s (level %d, queue offset %d) delivered %d times; the crashes allow %d", id, s.level, s.queueOffset, len(d), allowed)
		}
	}
}
