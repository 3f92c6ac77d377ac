package remoting

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Request codes for orderly consumption's queue locks.
const (
	// CodeLockBatchMQ is LOCK_BATCH_MQ: an orderly consumer locks the
	// queues it was assigned.
	CodeLockBatchMQ int16 = 41
	// CodeUnlockBatchMQ is UNLOCK_BATCH_MQ.
	CodeUnlockBatchMQ int16 = 42
)

// DefaultLockExpiry is how long a queue lock lives without being renewed
// (RocketMQ's rebalanceLockMaxLiveTime).
const DefaultLockExpiry = 60 * time.Second

// messageQueue is RocketMQ's MessageQueue as it appears in JSON bodies.
type messageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

type lockBatchBody struct {
	ConsumerGroup string         `json:"consumerGroup"`
	ClientID      string         `json:"clientId"`
	MQSet         []messageQueue `json:"mqSet"`
}

type queueLock struct {
	clientID string
	renewed  time.Time
}

// lockTable holds orderly consumption's queue locks: group → queue → owner.
type lockTable struct {
	mu    sync.Mutex
	locks map[string]map[messageQueue]*queueLock
}

// lock grants clientID every queue in mqs that is free, expired or
// already its own, and returns those.
func (t *lockTable) lock(group, clientID string, mqs []messageQueue, now time.Time, expiry time.Duration) []messageQueue {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.locks == nil {
		t.locks = make(map[string]map[messageQueue]*queueLock)
	}
	g := t.locks[group]
	if g == nil {
		g = make(map[messageQueue]*queueLock)
		t.locks[group] = g
	}
	ok := make([]messageQueue, 0, len(mqs))
	for _, mq := range mqs {
		l := g[mq]
		if l == nil || l.clientID == clientID || now.Sub(l.renewed) > expiry {
			g[mq] = &queueLock{clientID: clientID, renewed: now}
			ok = append(ok, mq)
		}
	}
	return ok
}

// unlock releases the queues in mqs held by clientID.
func (t *lockTable) unlock(group, clientID string, mqs []messageQueue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.locks[group]
	for _, mq := range mqs {
		if l := g[mq]; l != nil && l.clientID == clientID {
			delete(g, mq)
		}
	}
	if len(g) == 0 {
		delete(t.locks, group)
	}
}

func (b *Broker) handleLockBatch(req *Request) *Command {
	var body lockBatchBody
	if err := json.Unmarshal(req.Cmd.Body, &body); err != nil {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("decoding lock request body: %v", err))
	}
	ok := b.locks.lock(body.ConsumerGroup, body.ClientID, body.MQSet, b.cfg.Now(), DefaultLockExpiry)
	resp := NewResponse(req.Cmd, Success, "")
	resp.Body = compactJSON(struct {
		LockOKMQSet []messageQueue `json:"lockOKMQSet"`
	}{ok})
	return resp
}

func (b *Broker) handleUnlockBatch(req *Request) *Command {
	var body lockBatchBody
	if err := json.Unmarshal(req.Cmd.Body, &body); err != nil {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("decoding unlock request body: %v", err))
	}
	b.locks.unlock(body.ConsumerGroup, body.ClientID, body.MQSet)
	return NewResponse(req.Cmd, Success, "")
}
