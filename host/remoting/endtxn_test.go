package remoting

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/txn"
)

// fakeTxns answers End with err and records the requests.
type fakeTxns struct {
	mu   sync.Mutex
	ends []txn.End
	err  error
}

func (f *fakeTxns) End(e txn.End) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends = append(f.ends, e)
	return f.err
}

func endExt(state int) map[string]string {
	return map[string]string{"producerGroup": "PG", "tranStateTableOffset": "3", "commitLogOffset": "1234",
		"commitOrRollback": fmt.Sprint(state), "fromTransactionCheck": "false", "msgId": "U", "transactionId": "U"}
}

// TestEndTransactionFrames: END_TRANSACTION's header reaches the
// transaction service as sent, and its errors become RocketMQ's codes;
// state 0 is not answered.
func TestEndTransactionFrames(t *testing.T) {
	f := &fakeTxns{}
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true, Transactions: f})
	c := dialTest(t, e.addr)
	if r := c.call(CodeEndTransaction, endExt(8), nil); r.Code != Success {
		t.Fatalf("commit: code %d %s", r.Code, r.Remark)
	}
	want := txn.End{ProducerGroup: "PG", TranStateTableOffset: 3, CommitLogOffset: 1234, CommitOrRollback: record.SysFlagTransactionCommit, MsgID: "U", TransactionID: "U"}
	if len(f.ends) != 1 || f.ends[0] != want {
		t.Fatalf("End got %+v, want %+v", f.ends, want)
	}
	for _, tc := range []struct {
		err  error
		code int16
	}{
		{txn.ErrMismatch, SystemError},
		{txn.ErrNoHalf, SystemError},
		{txn.ErrNotMaster, SlaveNotAvailable},
		{txn.ErrTooLate, IllegalOperation},
	} {
		f.mu.Lock()
		f.err = tc.err
		f.mu.Unlock()
		if r := c.call(CodeEndTransaction, endExt(12), nil); r.Code != tc.code {
			t.Errorf("%v: code %d, want %d", tc.err, r.Code, tc.code)
		}
	}
	missing := endExt(8)
	delete(missing, "commitLogOffset")
	if r := c.call(CodeEndTransaction, missing, nil); r.Code != SystemError {
		t.Errorf("no commitLogOffset: code %d", r.Code)
	}
	n := len(f.ends)
	if _, err := c.callTimeout(&Command{Code: CodeEndTransaction, ExtFields: FieldsOf(endExt(0))}, 300*time.Millisecond); err == nil {
		t.Error("state 0 was answered")
	}
	if len(f.ends) != n {
		t.Error("state 0 reached the transaction service")
	}
}

// TestTransactionsOff: without a transaction service a prepared send is
// refused with NO_PERMISSION and END_TRANSACTION is not supported.
func TestTransactionsOff(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	if r := e.send(t, c, "T", 0, "x", props(record.PropertyTransactionPrepared, "true", record.PropertyProducerGroup, "PG")); r.Code != NoPermission {
		t.Fatalf("prepared send: code %d, want NO_PERMISSION", r.Code)
	}
	if r := c.call(CodeEndTransaction, endExt(8), nil); r.Code != RequestCodeNotSupported {
		t.Fatalf("END_TRANSACTION: code %d", r.Code)
	}
}

// TestCheckTransactionStateGoesToProducer: a check reaches a connection
// that sent a heartbeat with the group in producerDataSet, oneway, with
// the half topic and the offsets in its header.
func TestCheckTransactionStateGoesToProducer(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true, Transactions: &fakeTxns{}})
	if err := e.b.CheckTransactionState("PG", txn.Check{}); err == nil {
		t.Fatal("a check with no producer connected succeeded")
	}
	c := dialTest(t, e.addr)
	hb := `{"clientID":"cid","producerDataSet":[{"groupName":"PG"}],"consumerDataSet":[]}`
	if r := c.call(CodeHeartBeat, nil, []byte(hb)); r.Code != Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	if err := e.b.CheckTransactionState("PG", txn.Check{TranStateTableOffset: 7, CommitLogOffset: 99, MsgID: "U", TransactionID: "U", Record: []byte("rec")}); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-c.inbound:
		if req.Code != CodeCheckTransactionState || !req.IsOneway() || req.Ext("topic") != txn.HalfTopic ||
			req.Ext("tranStateTableOffset") != "7" || req.Ext("commitLogOffset") != "99" || string(req.Body) != "rec" {
			t.Fatalf("check request %+v", req)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no check arrived")
	}
}
