package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestPendingSemanticsSurvivePromotion: delayed (delay level 3, 3 s here),
// timer (2–6 s out) and undecided transactional half messages are sent to
// a sync master; once its slave holds them the master is killed with
// SIGKILL and the slave promoted (`keel admin promote`). The promoted
// node delivers every delayed and timer message, none before it was due,
// and resolves the half messages by checking back with a producer of the
// group that connects to it (its listener answers commit); a rolled back
// one is never delivered.
//
// The window: a delayed or timer message the old master delivered less
// than a metadata sync (replication.config.sync_meta_interval, 1 s) plus
// one persist before the kill may be delivered again by the promoted
// node, whose copy of the delivery progress is that old; every other
// message arrives exactly once.
func TestPendingSemanticsSurvivePromotion(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	const topic, group, pgroup = "E2E_SemPromote", "G_SemPromote", "PG_SemPromote"
	const window = 2500 * time.Millisecond // sync_meta_interval 1 s + the 100 ms persists, with room for a loaded machine
	const delay = 3 * time.Second          // level 3 of shortLevels
	sets := append([]string{shortLevels, "store.timer_max_delay=" + timerMaxDelay.String()}, shortTransactions...)
	dm, ds := t.TempDir(), t.TempDir()
	m := startMaster(t, "sync-master.toml", dm, "sem-m", sets...)
	s := startSlave(t, "sync-slave.toml", ds, "sem-s", m.haAddr(), sets...)
	m.waitWritable(1)

	// Half messages first, from a producer that leaves at once, so that
	// the master has nobody to check back with before the kill.
	l := &txListener{checks: make(chan string, 16)}
	tp := newTxProducer(t, m.Namesrv, pgroup, l)
	halves := []string{"unknown-p1", "unknown-p2", "unknown-p3"}
	for _, b := range halves {
		sendTx(t, tp, topic, b)
	}
	sendTx(t, tp, topic, "rollback-p")
	tp.Shutdown()

	p := newProducer(t, m.Namesrv, "sem-promote-producer")
	var sent []timerSent // delayed messages too: earliest and due from the send
	start := time.Now()
	for i := 0; time.Since(start) < 4*time.Second; i++ {
		if i%2 == 0 {
			body := fmt.Sprintf("delay-%03d", i)
			msg := primitive.NewMessage(topic, []byte(body))
			msg.WithDelayTimeLevel(3)
			before := time.Now()
			res, err := sendSync(p, msg)
			if err != nil || res.Status != primitive.SendOK {
				t.Fatalf("send %s: %v %v", body, res, err)
			}
			sent = append(sent, timerSent{body: body, earliest: before.Truncate(time.Millisecond).Add(delay), due: time.Now().Add(delay)})
		} else {
			kind := timerKinds[i%len(timerKinds)]
			d := 2*time.Second + time.Duration(i%5)*time.Second
			sent = append(sent, sendTimer(t, p, topic, fmt.Sprintf("timer-%s-%03d", kind.name, i), kind, d))
		}
		time.Sleep(70 * time.Millisecond)
	}
	p.Shutdown()
	waitSameCommitted(t, m, s, 0, 20*time.Second)
	m.kill()
	killed := time.Now()
	if out, err := adminCLI(t, "promote", s.Admin); err != nil {
		t.Fatalf("keel admin promote --admin %s: %v\n%s", s.Admin, err, out)
	}
	s.waitStatus(10*time.Second, "the promoted slave reporting role master", func(st *replStatus) bool { return st.Role == "master" })
	t.Logf("killed the master and promoted the slave %v after the first send", killed.Sub(start).Round(time.Millisecond))

	a := newArrivals()
	r := newReceived()
	startConsumer(t, consumerConfig{namesrv: s.Namesrv, group: group, instance: "sem-promote-consumer", topic: topic},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			r.handler(ctx, msgs...)
			return a.handler(ctx, msgs...)
		})
	// A producer of the half messages' group, connected to the promoted
	// node: its heartbeat makes it the one to check back with. Its own
	// send only brings the route (a sync master without a replica answers
	// SLAVE_NOT_AVAILABLE, which the client rolls back).
	tp2 := newTxProducer(t, s.Namesrv, pgroup, l)
	if _, err := tp2.SendMessageInTransaction(t.Context(), primitive.NewMessage(topic, []byte("rollback-route"))); err != nil {
		t.Logf("the route-fetching transactional send: %v", err)
	}
	waitAll(t, a, sent, 40*time.Second, "the promotion")
	if err := waitFor(60*time.Second, func() bool { return r.hasAll(halves) }); err != nil {
		t.Fatalf("half messages not resolved by the promoted node within 60s: %v", r.missing(halves))
	}
	time.Sleep(2 * time.Second) // room for late duplicates
	dueBefore, twice := checkOnce(t, a, sent, killed, window)
	for _, b := range halves {
		if n := r.count(b); n != 1 {
			t.Errorf("half message %s delivered %d times, want once", b, n)
		}
	}
	for _, b := range []string{"rollback-p", "rollback-route"} {
		if r.has(b) {
			t.Errorf("the rolled back %s was delivered", b)
		}
	}
	t.Logf("%d delayed and timer messages, %d due before the kill, %d delivered twice (window %v); %d half messages committed by check-back (%s)",
		len(sent), dueBefore, twice, window, len(halves), strings.Join(drain(l.checks), ", "))
}

// drain returns what ch holds now.
func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}
