package timer

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/txn"
)

// memProgress is a Progress in memory.
type memProgress struct {
	mu sync.Mutex
	m  map[int32]int64
}

func (p *memProgress) Get(k int32) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[k]
	return v, ok
}

func (p *memProgress) Set(k int32, v int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[k] = v
	return nil
}

func (p *memProgress) Persist() error { return nil }

func newService(t *testing.T, st *core.Store, dir string, prog *memProgress) *Service {
	return New(Config{
		Dir: dir, Precision: time.Second, MaxDelay: time.Hour,
		Log: st, Progress: prog,
		Append:  func(msgs []*record.Message) ([]core.AppendResult, error) { return st.AppendBatch(msgs, nil) },
		Durable: func(end int64, done func(bool)) { st.OnFlushed(end, 5*time.Second, done) },
		Flush:   func() error { _, err := st.Flush(); return err },
		Logger:  slog.New(slog.DiscardHandler),
	})
}

// sendTimer stores a message for T/0 due in delay through the rewrite.
func sendTimer(t *testing.T, st *core.Store, r Rule, id string, delay time.Duration) int64 {
	t.Helper()
	m := &record.Message{Topic: "T", Body: []byte(id), Properties: record.EncodeProperties(map[string]string{
		PropertyDelayMS: fmt.Sprint(delay.Milliseconds()), record.PropertyUniqKey: id,
	})}
	due, err := r.Rewrite(m, time.Now())
	if err != nil || due == 0 || m.Topic != Topic {
		t.Fatalf("rewrite %s: due %d, topic %s, %v", id, due, m.Topic, err)
	}
	if _, err := st.AppendBatch([]*record.Message{m}, nil); err != nil {
		t.Fatal(err)
	}
	return due
}

// deliveredT is every delivery on T/0: UNIQ_KEY → store timestamps.
func deliveredT(t *testing.T, st *core.Store) map[string][]int64 {
	out := map[string][]int64{}
	for off := int64(0); ; {
		res, err := st.GetMessages("T", 0, off, 256, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != core.Found {
			return out
		}
		data := res.Data
		for _, n := range res.Sizes {
			rec, err := record.Decode(data[:n])
			if err != nil {
				t.Fatal(err)
			}
			data = data[n:]
			p, _ := record.ParseProperties(rec.Properties)
			if _, ok := p[PropertyOutMS]; ok {
				t.Errorf("delivered copy keeps %s", PropertyOutMS)
			}
			out[p[record.PropertyUniqKey]] = append(out[p[record.PropertyUniqKey]], rec.StoreTimestamp)
		}
		off = res.NextOffset
	}
}

// TestServiceDeliversOnTimeAcrossCrash sends timers, crashes the service
// (no save) while some are pending, restarts it, and checks that every
// timer is delivered, none before its due time, and late ones within 1 s.
func TestServiceDeliversOnTimeAcrossCrash(t *testing.T) {
	st, err := core.Open(core.Options{Dir: t.TempDir(), FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := filepath.Join(t.TempDir(), "timer")
	prog := &memProgress{m: map[int32]int64{}}
	svc := newService(t, st, dir, prog)
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	dues := map[string]int64{}
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("m%d", i)
		dues[id] = sendTimer(t, st, svc.Rule(), id, time.Duration(300+i*60)*time.Millisecond)
		svc.Notify()
	}
	time.Sleep(1200 * time.Millisecond)
	svc.halt()
	svc = newService(t, st, dir, prog)
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	deadline := time.Now().Add(6 * time.Second)
	for {
		got := deliveredT(t, st)
		if len(got) == len(dues) || time.Now().After(deadline) {
			for id, due := range dues {
				ts := got[id]
				if len(ts) == 0 {
					t.Errorf("%s due %d never delivered", id, due)
					continue
				}
				for _, at := range ts {
					if at < due {
						t.Errorf("%s delivered at %d, %d ms before due", id, at, due-at)
					}
				}
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRewriteRules covers the put path's answers.
func TestRewriteRules(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	r := Rule{Enabled: true, MaxDelay: time.Hour}
	msg := func(k, v string) *record.Message {
		return &record.Message{Topic: "T", QueueID: 2, Properties: record.EncodeProperties(map[string]string{k: v})}
	}
	m := msg(record.PropertyTimerDelaySec, "3")
	if due, err := r.Rewrite(m, now); err != nil || due != 1_003_000 || m.Topic != Topic || m.QueueID != 0 {
		t.Fatalf("TIMER_DELAY_SEC: due %d, %s/%d, %v", due, m.Topic, m.QueueID, err)
	}
	p, _ := record.ParseProperties(m.Properties)
	if p[record.PropertyRealTopic] != "T" || p[record.PropertyRealQueueID] != "2" || p[PropertyOutMS] != "1003000" {
		t.Fatalf("properties %v", p)
	}
	if due, err := r.Rewrite(msg(record.PropertyTimerDeliverMS, "999000"), now); err != nil || due != 0 {
		t.Fatalf("past TIMER_DELIVER_MS: due %d, %v; want a normal message", due, err)
	}
	if _, err := r.Rewrite(msg(PropertyDelayMS, "3600001"), now); err == nil {
		t.Fatal("beyond the maximum delay accepted")
	}
	if _, err := r.Rewrite(msg(PropertyDelayMS, "x"), now); err == nil {
		t.Fatal("a non-integer accepted")
	}
	// A half message (already parked in the half topic by the
	// transaction rewrite) is not timed before it is committed.
	half := msg(record.PropertyTimerDelaySec, "3")
	half.Topic = txn.HalfTopic
	if due, err := r.Rewrite(half, now); err != nil || due != 0 || half.Topic != txn.HalfTopic {
		t.Fatalf("half message: due %d, topic %s, %v; want it left alone", due, half.Topic, err)
	}
	if _, err := (Rule{}).Rewrite(msg(PropertyDelayMS, "5"), now); err != ErrDisabled {
		t.Fatalf("disabled: %v", err)
	}
	rec := &record.Record{Properties: m.Properties, Body: []byte("b")}
	d, err := Deliver(rec)
	if err != nil || d.Topic != "T" || d.QueueID != 2 {
		t.Fatalf("deliver: %+v, %v", d, err)
	}
	if p, _ := record.ParseProperties(d.Properties); len(p) != 0 {
		t.Fatalf("delivered properties %v, want none left", p)
	}
}

// TestDeliveryGoesOnWhileNotDurable: while Durable answers false (a sync
// master with no in-sync replica), timers of later ticks are still
// delivered on time, but the read tick, which a restart starts from, does
// not pass the first unconfirmed tick; once Durable answers true it
// catches up. Before, the delivery loop waited on the first tick's
// durability and delivered nothing after it.
func TestDeliveryGoesOnWhileNotDurable(t *testing.T) {
	st, err := core.Open(core.Options{Dir: t.TempDir(), FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	prog := &memProgress{m: map[int32]int64{}}
	svc := newService(t, st, filepath.Join(t.TempDir(), "timer"), prog)
	var durable sync.Mutex
	ok := false
	svc.cfg.Durable = func(end int64, done func(bool)) {
		durable.Lock()
		defer durable.Unlock()
		done(ok)
	}
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	first := svc.run.Load().ix.state().ReadTick
	dues := map[string]int64{}
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("n%d", i)
		dues[id] = sendTimer(t, st, svc.Rule(), id, time.Duration(300+i*1000)*time.Millisecond)
		svc.Notify()
	}
	deadline := time.Now().Add(8 * time.Second)
	for len(deliveredT(t, st)) < len(dues) {
		if time.Now().After(deadline) {
			t.Fatalf("delivered %v of %d timers 8s after their sends while the log was not durable", deliveredT(t, st), len(dues))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// n0 was delivered in a tick no later than its store second (a
	// timer added to a tick already walked goes to the next one).
	walkedIn := floorDiv(deliveredT(t, st)["n0"][0], svc.prec)
	if rt := svc.run.Load().ix.state().ReadTick; rt > walkedIn {
		t.Fatalf("read tick %d passed tick %d, whose delivery is not durable (started at %d)", rt, walkedIn, first)
	}
	durable.Lock()
	ok = true
	durable.Unlock()
	lastDue := floorDiv(dues["n2"], svc.prec)
	for deadline := time.Now().Add(5 * time.Second); svc.run.Load().ix.state().ReadTick <= lastDue; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("read tick %d did not pass tick %d once the log was durable", svc.run.Load().ix.state().ReadTick, lastDue)
		}
	}
}
