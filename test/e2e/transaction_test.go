package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// shortTransactions checks undecided half messages every second, once
// they are a second old.
var shortTransactions = []string{"store.transaction_check_interval=1s", "store.transaction_timeout=1s"}

// txListener answers by body prefix: "commit-" and "rollback-" at once,
// "unknown-" unknown at first and commit when checked.
type txListener struct{ checks chan string }

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch b := string(m.Body); {
	case strings.HasPrefix(b, "commit-"):
		return primitive.CommitMessageState
	case strings.HasPrefix(b, "rollback-"):
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	select {
	case l.checks <- string(m.Body):
	default:
	}
	if strings.HasPrefix(string(m.Body), "rollback-") {
		return primitive.RollbackMessageState
	}
	return primitive.CommitMessageState
}

func newTxProducer(t *testing.T, namesrv, group string, l *txListener) rocketmq.TransactionProducer {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
		producer.WithGroupName(group),
		producer.WithInstanceName(group+"-instance"),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatalf("NewTransactionProducer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("transaction producer Start: %v", err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

func sendTx(t *testing.T, p rocketmq.TransactionProducer, topic, body string) *primitive.TransactionSendResult {
	t.Helper()
	res, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body)))
	if err != nil {
		t.Fatalf("send %s in a transaction: %v", body, err)
	}
	if res.Status != primitive.SendOK {
		t.Fatalf("send %s: status %d", body, res.Status)
	}
	return res
}

// TestTransactionCommitRollbackCheck: with rocketmq-client-go's
// TransactionProducer, a committed message is delivered once, a rolled
// back one never, and one left unknown is delivered once its check-back
// answers commit.
func TestTransactionCommitRollbackCheck(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml", extra: shortTransactions})
	const topic = "E2E_Tx"
	r := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: "G_Tx", instance: "tx-consumer", topic: topic}, r.handler)
	l := &txListener{checks: make(chan string, 16)}
	p := newTxProducer(t, k.Namesrv, "PG_Tx", l)
	res := sendTx(t, p, topic, "commit-1")
	if res.TransactionID == "" {
		t.Error("the send reply has no transactionId")
	}
	sendTx(t, p, topic, "rollback-1")
	sendTx(t, p, topic, "unknown-1")
	want := []string{"commit-1", "unknown-1"}
	if err := waitFor(40*time.Second, func() bool { return r.hasAll(want) }); err != nil {
		t.Fatalf("missing after 40s: %v (checks so far: %d)", r.missing(want), len(l.checks))
	}
	time.Sleep(3 * time.Second) // room for a rollback or duplicate to show
	for _, b := range want {
		if n := r.count(b); n != 1 {
			t.Errorf("%s delivered %d times", b, n)
		}
	}
	if r.has("rollback-1") {
		t.Error("a rolled back message was delivered")
	}
	if got := r.first("commit-1"); got != nil && got.MsgId != res.MsgID {
		t.Errorf("committed message arrived with msgId %s, the send returned %s", got.MsgId, res.MsgID)
	}
}

// TestTransactionHalfSurvivesKill9: half messages left unknown when the
// broker is killed (-9) are resolved by check-back after the restart.
func TestTransactionHalfSurvivesKill9(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml", extra: shortTransactions})
	const topic = "E2E_TxKill"
	l := &txListener{checks: make(chan string, 16)}
	p := newTxProducer(t, k.Namesrv, "PG_TxKill", l)
	want := []string{"unknown-k1", "unknown-k2", "unknown-k3"}
	for _, b := range want {
		sendTx(t, p, topic, b)
	}
	sendTx(t, p, topic, "rollback-k")
	k.kill()
	k.restart()
	r := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: "G_TxKill", instance: "tx-kill-consumer", topic: topic}, r.handler)
	if err := waitFor(60*time.Second, func() bool { return r.hasAll(want) }); err != nil {
		t.Fatalf("half messages not resolved 60s after the restart: %v", r.missing(want))
	}
	time.Sleep(3 * time.Second)
	for _, b := range want {
		if n := r.count(b); n != 1 {
			t.Errorf("%s delivered %d times", b, n)
		}
	}
	if r.has("rollback-k") {
		t.Error("a rolled back message was delivered")
	}
}
