package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// env is a Service over a real store, with the checks it sent recorded.
type env struct {
	t     *testing.T
	dir   string
	store *core.Store
	svc   *Service
	// failOp makes the next op record append fail (a crash between a
	// commit's real put and its op record).
	failOp bool

	mu     sync.Mutex
	checks []Check
	groups []string
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, dir: t.TempDir()}
	e.open()
	return e
}

func (e *env) open() {
	e.t.Helper()
	st, err := core.Open(core.Options{Dir: e.dir, FlushInterval: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
	e.t.Cleanup(func() { st.Close() })
	e.svc = New(Config{
		Log:     st,
		Offsets: st.Meta().ConsumerOffsets,
		Append: func(msgs []*record.Message) ([]core.AppendResult, error) {
			if e.failOp && msgs[0].Topic == OpTopic {
				e.failOp = false
				return nil, errors.New("killed")
			}
			return st.AppendBatch(msgs, nil)
		},
		Check: func(group string, c Check) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.checks = append(e.checks, c)
			e.groups = append(e.groups, group)
			return nil
		},
		Flush:     func() error { _, err := st.Flush(); return err },
		Interval:  time.Hour, // rounds are run by the tests (CheckOnce)
		Timeout:   time.Second,
		MaxChecks: 3,
		Logger:    slog.New(slog.DiscardHandler),
	})
	e.svc.Start()
}

// restart closes the store as kill -9 would leave it (minus the page
// cache, which a killed process keeps) and opens it again.
func (e *env) restart() {
	e.svc.Stop()
	e.store.Close()
	e.open()
}

func (e *env) dispatched() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.store.WaitDispatched(ctx, e.store.Positions().Committed-1); err != nil {
		e.t.Fatal(err)
	}
}

// send stores a half message born age ago and returns the End that
// names it (what rocketmq-client-go computes from the send reply).
func (e *env) send(id string, age time.Duration) End {
	e.t.Helper()
	m := &record.Message{Topic: "T", QueueID: 2, Body: []byte("body-" + id), SysFlag: record.SysFlagTransactionPrepared,
		BornTimestamp: time.Now().Add(-age).UnixMilli(),
		Properties: record.EncodeProperties(map[string]string{
			record.PropertyTransactionPrepared: "true", record.PropertyProducerGroup: "PG", record.PropertyUniqKey: id,
		})}
	if !Rewrite(m) {
		e.t.Fatalf("%s is not a half message", id)
	}
	res, err := e.store.AppendBatch([]*record.Message{m}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return End{ProducerGroup: "PG", TranStateTableOffset: res[0].QueueOffset, CommitLogOffset: res[0].PhysOffset,
		MsgID: id, TransactionID: TransactionID(m)}
}

// delivered returns the UNIQ_KEYs in topic T queue 2, in order.
func (e *env) delivered() []string {
	e.t.Helper()
	e.dispatched()
	res, err := e.store.GetMessages("T", 2, 0, 1000, 1<<20, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	data := res.Data
	for _, size := range res.Sizes {
		rec, err := record.Decode(data[:size])
		if err != nil {
			e.t.Fatal(err)
		}
		data = data[size:]
		id, _ := record.GetProperty(rec.Properties, record.PropertyUniqKey)
		if tt := record.TransactionType(rec.SysFlag); tt != record.SysFlagTransactionCommit {
			e.t.Errorf("delivered %s has transaction type %d", id, tt)
		}
		if _, ok := record.GetProperty(rec.Properties, record.PropertyTransactionPrepared); ok {
			e.t.Errorf("delivered %s keeps %s", id, record.PropertyTransactionPrepared)
		}
		ids = append(ids, id)
	}
	return ids
}

func (e *env) check() {
	e.t.Helper()
	e.dispatched()
	if err := e.svc.CheckOnce(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) takeChecks() []Check {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.checks
	e.checks = nil
	return c
}

func commitOf(e End) End   { e.CommitOrRollback = record.SysFlagTransactionCommit; return e }
func rollbackOf(e End) End { e.CommitOrRollback = record.SysFlagTransactionRollback; return e }

func TestRewrite(t *testing.T) {
	m := &record.Message{Topic: "T", QueueID: 3, SysFlag: record.SysFlagTransactionPrepared | record.SysFlagMultiTags,
		Properties: record.EncodeProperties(map[string]string{record.PropertyTransactionPrepared: "true", record.PropertyUniqKey: "U"})}
	if !Rewrite(m) {
		t.Fatal("not rewritten")
	}
	if m.Topic != HalfTopic || m.QueueID != 0 || m.SysFlag != record.SysFlagMultiTags {
		t.Fatalf("half record %s/%d sysFlag %d", m.Topic, m.QueueID, m.SysFlag)
	}
	for k, want := range map[string]string{record.PropertyRealTopic: "T", record.PropertyRealQueueID: "3", record.PropertyTransactionID: "U"} {
		if got, _ := record.GetProperty(m.Properties, k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if TransactionID(m) != "U" {
		t.Errorf("TransactionID = %q", TransactionID(m))
	}
	if Rewrite(m) {
		t.Error("a half record was rewritten again")
	}
	for name, props := range map[string]map[string]string{
		"plain":            {record.PropertyUniqKey: "U"},
		"false":            {record.PropertyTransactionPrepared: "false"},
		"old client retry": {record.PropertyTransactionPrepared: "true", record.PropertyDelayLevel: "3"},
	} {
		m := &record.Message{Topic: "T", ReconsumeTimes: 1, Properties: record.EncodeProperties(props)}
		if Rewrite(m) || m.Topic != "T" {
			t.Errorf("%s: rewritten", name)
		}
	}
}

func TestOpBody(t *testing.T) {
	got, err := parseOpBody([]byte("3,17,"))
	if err != nil || fmt.Sprint(got) != "[3 17]" {
		t.Fatalf("parseOpBody = %v, %v", got, err)
	}
	if _, err := parseOpBody([]byte("x,")); err == nil {
		t.Fatal("a malformed body parsed")
	}
}

func TestCommitAndRollback(t *testing.T) {
	e := newEnv(t)
	a, b := e.send("A", 0), e.send("B", 0)
	e.dispatched()
	if got := e.delivered(); len(got) != 0 {
		t.Fatalf("half messages visible in their topic: %v", got)
	}
	if err := e.svc.End(commitOf(a)); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.End(rollbackOf(b)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(e.delivered()); got != "[A]" {
		t.Fatalf("delivered %s, want [A]", got)
	}
	// Decided: a check round (even once they are old) asks about neither.
	e.svc.cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	e.check()
	if c := e.takeChecks(); len(c) != 0 {
		t.Fatalf("decided messages checked: %+v", c)
	}
}

func TestEndRefusals(t *testing.T) {
	e := newEnv(t)
	a := e.send("A", 0)
	old := e.send("OLD", time.Minute)
	e.dispatched()
	for name, tc := range map[string]struct {
		end  End
		want error
	}{
		"wrong log offset":   {func() End { x := commitOf(a); x.CommitLogOffset++; return x }(), ErrNoHalf},
		"wrong queue offset": {func() End { x := commitOf(a); x.TranStateTableOffset = 9; return x }(), ErrMismatch},
		"wrong group":        {func() End { x := commitOf(a); x.ProducerGroup = "other"; return x }(), ErrMismatch},
		"unknown state":      {a, ErrBadState},
		"after the timeout":  {commitOf(old), ErrTooLate},
	} {
		if err := e.svc.End(tc.end); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// A late decision is accepted when it answers a check.
	late := commitOf(old)
	late.FromTransactionCheck = true
	if err := e.svc.End(late); err != nil {
		t.Fatal(err)
	}
	e.svc.Stop()
	if err := e.svc.End(commitOf(a)); !errors.Is(err, ErrNotMaster) {
		t.Fatalf("stopped service: %v, want ErrNotMaster", err)
	}
	if got := fmt.Sprint(e.delivered()); got != "[OLD]" {
		t.Fatalf("delivered %s, want [OLD]", got)
	}
}

// TestCheckBack: an undecided half message older than the timeout is
// re-appended and checked; the producer's answer names the copy; after
// MaxChecks unanswered checks it moves to CheckMaxTopic.
func TestCheckBack(t *testing.T) {
	e := newEnv(t)
	young := e.send("Y", 0)
	e.send("U", time.Minute)
	e.send("M", time.Minute)
	e.check()
	_ = young
	// Nothing: Y is the head of the queue and young, so the round stops.
	if c := e.takeChecks(); len(c) != 0 {
		t.Fatalf("checks behind a young head: %d", len(c))
	}
	e.svc.cfg.Now = func() time.Time { return time.Now().Add(2 * time.Second) }
	e.check()
	checks := e.takeChecks()
	if len(checks) != 3 {
		t.Fatalf("%d checks, want 3 (Y, U, M)", len(checks))
	}
	byID := map[string]Check{}
	for _, c := range checks {
		rec, err := record.Decode(c.Record)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Topic != "T" || rec.QueueID != 2 || rec.PhysOffset != c.CommitLogOffset || rec.QueueOffset != c.TranStateTableOffset {
			t.Fatalf("check body %s/%d at %d/%d, check names %d/%d", rec.Topic, rec.QueueID, rec.PhysOffset, rec.QueueOffset, c.CommitLogOffset, c.TranStateTableOffset)
		}
		if n, _ := record.GetProperty(rec.Properties, record.PropertyTransactionCheckTimes); n != "1" {
			t.Fatalf("check times %q, want 1", n)
		}
		byID[c.MsgID] = c
	}
	// U commits from its check (with the copy's offsets), Y rolls back; M
	// stays unanswered.
	answer := func(id string, state int32) {
		c := byID[id]
		err := e.svc.End(End{ProducerGroup: "PG", TranStateTableOffset: c.TranStateTableOffset, CommitLogOffset: c.CommitLogOffset,
			CommitOrRollback: state, FromTransactionCheck: true, MsgID: id, TransactionID: c.TransactionID})
		if err != nil {
			t.Fatal(err)
		}
	}
	answer("U", record.SysFlagTransactionCommit)
	answer("Y", record.SysFlagTransactionRollback)
	for round := 2; round <= 4; round++ {
		now := time.Now().Add(time.Duration(round) * 2 * time.Second)
		e.svc.cfg.Now = func() time.Time { return now }
		e.check()
		c := e.takeChecks()
		if round <= 3 && (len(c) != 1 || c[0].MsgID != "M") {
			t.Fatalf("round %d: checks %+v, want one of M", round, c)
		}
		if round == 4 && len(c) != 0 {
			t.Fatalf("round 4: M checked a 4th time (max 3)")
		}
	}
	if got := fmt.Sprint(e.delivered()); got != "[U]" {
		t.Fatalf("delivered %s, want [U]", got)
	}
	e.dispatched()
	if res, _ := e.store.GetMessages(CheckMaxTopic, 0, 0, 10, 1<<20, nil); len(res.Sizes) != 1 {
		t.Fatalf("%s holds %d messages, want M", CheckMaxTopic, len(res.Sizes))
	}
}

// TestRestart: decisions and check progress survive a restart; pending
// half messages are checked after it.
func TestRestart(t *testing.T) {
	e := newEnv(t)
	a := e.send("A", 0)
	e.send("P", 0)
	if err := e.svc.End(commitOf(a)); err != nil {
		t.Fatal(err)
	}
	e.store.Flush()
	e.restart()
	e.svc.cfg.Now = func() time.Time { return time.Now().Add(2 * time.Second) }
	e.check()
	c := e.takeChecks()
	if len(c) != 1 || c[0].MsgID != "P" {
		t.Fatalf("checks after restart %+v, want one of P", c)
	}
	e.restart()
	e.svc.cfg.Now = func() time.Time { return time.Now().Add(2 * time.Second) }
	e.check()
	c = e.takeChecks()
	if len(c) != 1 || c[0].MsgID != "P" {
		t.Fatalf("second restart: checks %+v, want the copy of P once", c)
	}
	if n, _ := record.GetProperty(mustDecode(t, c[0].Record).Properties, record.PropertyTransactionCheckTimes); n != "2" {
		t.Fatalf("check times %q after two rounds, want 2", n)
	}
	if got := fmt.Sprint(e.delivered()); got != "[A]" {
		t.Fatalf("delivered %s, want [A]", got)
	}
}

// TestCrashBetweenCommitAndOp is the documented window: the real message
// is stored but the op record is not, so the half message is checked and a
// producer answering commit gets it delivered twice.
func TestCrashBetweenCommitAndOp(t *testing.T) {
	e := newEnv(t)
	a := e.send("A", 0)
	e.failOp = true
	if err := e.svc.End(commitOf(a)); err == nil {
		t.Fatal("End succeeded without its op record")
	}
	e.restart()
	e.svc.cfg.Now = func() time.Time { return time.Now().Add(2 * time.Second) }
	e.check()
	c := e.takeChecks()
	if len(c) != 1 {
		t.Fatalf("%d checks, want 1", len(c))
	}
	err := e.svc.End(End{ProducerGroup: "PG", TranStateTableOffset: c[0].TranStateTableOffset, CommitLogOffset: c[0].CommitLogOffset,
		CommitOrRollback: record.SysFlagTransactionCommit, FromTransactionCheck: true, MsgID: "A", TransactionID: "A"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(e.delivered()); got != "[A A]" {
		t.Fatalf("delivered %s, want [A A] (the documented duplicate)", got)
	}
}

func mustDecode(t *testing.T, b []byte) *record.Record {
	t.Helper()
	r, err := record.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
