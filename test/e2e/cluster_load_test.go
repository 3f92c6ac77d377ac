package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/keelmq/keel/core/record"
)

// clusterAck is one message acknowledged SEND_OK: where the send result
// says it is stored, and when the ack arrived.
type clusterAck struct {
	body   string
	group  string // broker_name of the queue
	queue  int
	qoff   int64  // queue offset
	broker string // the broker that stored it (from the offset message id)
	at     time.Time
}

// clusterLoad runs senders goroutines that send numbered messages in a
// loop (pause between sends) and records every SEND_OK with its queue and
// queue offset; other outcomes are counted, never retried by the test.
type clusterLoad struct {
	topic string
	pause time.Duration
	stop  chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	senders int
	acks    []clusterAck
	notOK   map[string]int // status name or "error"
	lastErr error
}

func startClusterLoad(p sender, topic string, senders int, pause time.Duration) *clusterLoad {
	l := &clusterLoad{topic: topic, pause: pause, stop: make(chan struct{}), notOK: map[string]int{}}
	l.addSenders(p, senders)
	return l
}

// addSenders starts n more sender goroutines on producer p.
func (l *clusterLoad) addSenders(p sender, n int) {
	l.mu.Lock()
	first := l.senders
	l.senders += n
	l.mu.Unlock()
	for s := first; s < first+n; s++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-time.After(l.pause):
				}
				body := fmt.Sprintf("%s-s%d-%07d", l.topic, s, i)
				m := primitive.NewMessage(l.topic, []byte(body))
				m.WithKeys([]string{body})
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
				res, err := p.SendSync(ctx, m)
				cancel()
				l.record(body, res, err)
				if err != nil {
					time.Sleep(50 * time.Millisecond) // a broker is down: do not spin
				}
			}
		}()
	}
}

func (l *clusterLoad) record(body string, res *primitive.SendResult, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.notOK["error"]++
		l.lastErr = err
	case res.Status != primitive.SendOK:
		l.notOK[statusName(res.Status)]++
	default:
		a := clusterAck{body: body, qoff: res.QueueOffset, at: time.Now()}
		if res.MessageQueue != nil {
			a.group, a.queue = res.MessageQueue.BrokerName, res.MessageQueue.QueueId
		}
		if addr, _, err := record.ParseOffsetMsgID(res.OffsetMsgID); err == nil {
			a.broker = addr.String()
		}
		l.acks = append(l.acks, a)
	}
}

// finish stops the senders and waits for their last sends.
func (l *clusterLoad) finish() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// acked returns a copy of every ack so far.
func (l *clusterLoad) acked() []clusterAck {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]clusterAck(nil), l.acks...)
}

// ackCount is how many sends were acknowledged SEND_OK so far.
func (l *clusterLoad) ackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// summary describes the outcomes for logs and failures.
func (l *clusterLoad) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.notOK))
	for k := range l.notOK {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := fmt.Sprintf("%d SEND_OK", len(l.acks))
	for _, k := range keys {
		s += fmt.Sprintf(", %d %s", l.notOK[k], k)
	}
	if l.lastErr != nil {
		s += fmt.Sprintf(" (last error: %v)", l.lastErr)
	}
	return s
}

// bodies are the acked messages' bodies.
func bodiesOf(acks []clusterAck) []string {
	out := make([]string, len(acks))
	for i, a := range acks {
		out[i] = a.body
	}
	return out
}

// checkAcksStored fails the test for every ack of group whose message is
// not in log at the queue and queue offset its send result named (log is
// a store of that group, read after the test stopped it).
func checkAcksStored(t *testing.T, group string, acks []clusterAck, log *storeLog, what string) {
	t.Helper()
	type at struct {
		queue int
		qoff  int64
	}
	where := make(map[string][]at, len(log.recs))
	for _, r := range log.recs {
		where[string(r.Body)] = append(where[string(r.Body)], at{int(r.QueueID), r.QueueOffset})
	}
	bad, n := 0, 0
	for _, a := range acks {
		if a.group != group {
			continue
		}
		n++
		found := false
		for _, w := range where[a.body] {
			found = found || (w.queue == a.queue && w.qoff == a.qoff)
		}
		if !found {
			if bad++; bad <= 10 {
				t.Errorf("%s: %s acknowledged SEND_OK at %s (queue %d, offset %d, by %s) is not in %s at that queue offset (found at %v)",
					group, a.body, a.at.Format("15:04:05.000"), a.queue, a.qoff, a.broker, what, where[a.body])
			}
		}
	}
	if bad > 10 {
		t.Errorf("%s: ... %d of %d acknowledged messages missing from %s in all", group, bad, n, what)
	}
	t.Logf("%s: %d acknowledged messages checked in %s (%d records), %d missing", group, n, what, len(log.recs), bad)
}

// deliveryLog records when each message body was delivered to a consumer.
type deliveryLog struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func newDeliveryLog() *deliveryLog { return &deliveryLog{at: map[string][]time.Time{}} }

// handler records every message and succeeds.
func (d *deliveryLog) handler(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	now := time.Now()
	d.mu.Lock()
	for _, m := range msgs {
		d.at[string(m.Body)] = append(d.at[string(m.Body)], now)
	}
	d.mu.Unlock()
	return consumer.ConsumeSuccess, nil
}

// missing returns how many of want have not been delivered, and the
// first few of them.
func (d *deliveryLog) missing(want []string) (int, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, some := 0, []string(nil)
	for _, b := range want {
		if len(d.at[b]) == 0 {
			if n++; n <= 5 {
				some = append(some, b)
			}
		}
	}
	return n, some
}

// redelivery is a message delivered more than once.
type redelivery struct {
	body         string
	first, again time.Time
}

// redeliveries returns every second or later delivery.
func (d *deliveryLog) redeliveries() []redelivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []redelivery
	for b, ts := range d.at {
		for _, t := range ts[1:] {
			out = append(out, redelivery{b, ts[0], t})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].again.Before(out[j].again) })
	return out
}

// total is the number of deliveries.
func (d *deliveryLog) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, ts := range d.at {
		n += len(ts)
	}
	return n
}

// offsetSyncWindow is how much consumption a failover may deliver again:
// the client commits offsets every 5 s (rocketmq-client-go's
// _PersistOffsetInterval) and the master syncs them to its slave every
// second (replication.config.sync_meta_interval), plus slack for a
// loaded 2-core machine.
const offsetSyncWindow = 10 * time.Second

// checkNoOffsetReset fails the test for every redelivery that the offset
// window of a failover does not explain: a message delivered again must
// have been first delivered at most offsetSyncWindow before a failure
// (failures: when masters were killed or cut off) that came before the
// redelivery. A consumer moved back further (an offset reset) re-delivers
// older messages.
func checkNoOffsetReset(t *testing.T, d *deliveryLog, failures []time.Time) {
	t.Helper()
	rs := d.redeliveries()
	bad := 0
	for _, r := range rs {
		ok := false
		for _, f := range failures {
			ok = ok || (!r.first.Before(f.Add(-offsetSyncWindow)) && f.Before(r.again))
		}
		if !ok {
			if bad++; bad <= 10 {
				t.Errorf("offset reset? %s delivered at %s and again at %s, not within %v before a failover (failovers at %v)",
					r.body, r.first.Format("15:04:05.000"), r.again.Format("15:04:05.000"), offsetSyncWindow, fmtTimes(failures))
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d unexplained redeliveries in all", bad)
	}
	t.Logf("consumer: %d deliveries, %d redeliveries (%d unexplained by the offset sync window)", d.total(), len(rs), bad)
}

func fmtTimes(ts []time.Time) string {
	s := make([]string, len(ts))
	for i, x := range ts {
		s[i] = x.Format("15:04:05.000")
	}
	return fmt.Sprint(s)
}

// waitAcks waits until group acknowledged a send after since.
func (l *clusterLoad) waitAcks(group string, since time.Time, d time.Duration) error {
	if err := waitFor(d, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for i := len(l.acks) - 1; i >= 0 && l.acks[i].at.After(since); i-- {
			if l.acks[i].group == group {
				return true
			}
		}
		return false
	}); err != nil {
		return fmt.Errorf("no SEND_OK from %s within %v after %s (%s)", group, d, since.Format("15:04:05.000"), l.summary())
	}
	return nil
}

// other is the group of groups that is not g (two groups).
func other(groups []string, g string) string {
	for _, x := range groups {
		if x != g {
			return x
		}
	}
	return g
}

// bodies returns every delivered body, sorted.
func (d *deliveryLog) bodies() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.at))
	for b := range d.at {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}
