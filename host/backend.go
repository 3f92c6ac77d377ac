package host

import (
	"context"
	"fmt"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/host/txn"
)

// backend implements remoting.Backend (and namesrv.RegistrarSource) over the node's
// store, plugins and ack policies.
type backend struct {
	n *Node
}

var (
	_ remoting.Backend     = backend{}
	_ remoting.BrokerNamer = backend{}
)

func (b backend) store() *core.Store { return b.n.store }

// Topic implements remoting.TopicTable.
func (b backend) Topic(name string) (meta.TopicConfig, bool) {
	return b.store().Meta().Topics.Get(name)
}

// CreateTopic implements remoting.TopicTable.
func (b backend) CreateTopic(c meta.TopicConfig) (meta.TopicConfig, error) {
	topics := b.store().Meta().Topics
	if got, ok := topics.Get(c.TopicName); ok {
		return got, nil
	}
	if c.Perm == 0 {
		c.Perm = meta.PermRead | meta.PermWrite
	}
	if err := topics.Put(c); err != nil {
		return meta.TopicConfig{}, fmt.Errorf("create topic %s: %w", c.TopicName, err)
	}
	got, _ := topics.Get(c.TopicName)
	b.n.log.Info("topic created", "topic", c.TopicName, "queues", c.WriteQueueNums)
	return got, nil
}

// MaxMessageSize implements remoting.Backend.
func (b backend) MaxMessageSize() int { return b.store().MaxMessageSize() }

// Append implements remoting.Backend. The store's errors are returned as
// they are: the broker recognises core's sentinels (remoting's errorCodes).
func (b backend) Append(ctx context.Context, msgs []*record.Message) ([]core.AppendResult, error) {
	if r := b.n.gate.refused(); r != nil {
		if r.plugin {
			b.n.metrics.appendErrors.Inc()
		}
		return nil, r.err
	}
	start := time.Now()
	topic := firstTopic(msgs) // as the client named it, for keel_topic_*_in_total
	// Delayed messages go to the schedule topic (the one place every
	// write path, SEND, batch and send-back, passes through); levels[i]
	// is the level of msgs[i], 0 for a message not delayed.
	var levels []int32
	if sched := b.n.schedule; sched != nil {
		for i, m := range msgs {
			// A transaction half message goes to the half topic and is
			// never delayed (RocketMQ's clients drop DELAY from it).
			if b.n.txn != nil && txn.Rewrite(m) {
				if len(msgs) > 1 {
					b.n.metrics.appendErrors.Inc()
					return nil, fmt.Errorf("message %d of %d: transactional messages cannot be batched: %w", i+1, len(msgs), record.ErrInvalid)
				}
				continue
			}
			lvl, err := sched.Levels().Rewrite(m)
			if err != nil {
				b.n.metrics.appendErrors.Inc()
				return nil, fmt.Errorf("delay message %d of %d: %w", i+1, len(msgs), err)
			}
			if lvl > 0 && levels == nil {
				levels = make([]int32, len(msgs))
			}
			if levels != nil {
				levels[i] = lvl
			}
		}
	}
	// Timer messages go to the timer topic, after the delay rewrite (a
	// level wins over a timer).
	var dues []int64 // dues[i]: msgs[i]'s due time, 0 for a message not a timer
	for i, m := range msgs {
		due, err := b.n.timerRule.Rewrite(m, start)
		if err != nil {
			b.n.metrics.appendErrors.Inc()
			return nil, fmt.Errorf("timer message %d of %d: %w", i+1, len(msgs), err)
		}
		if due > 0 && dues == nil {
			dues = make([]int64, len(msgs))
		}
		if dues != nil {
			dues[i] = due
		}
	}
	res, err := b.store().AppendBatch(msgs, make([]core.AppendResult, 0, len(msgs)))
	if err != nil {
		b.n.metrics.appendErrors.Inc()
		return nil, err
	}
	var bytes int
	for i, r := range res {
		bytes += int(r.Size)
		if levels != nil && levels[i] > 0 {
			b.n.schedule.Notify(levels[i], r.End())
		}
	}
	if dues != nil && b.n.timer != nil {
		b.n.timer.Appended(res, dues)
	}
	b.n.metrics.appendMsgs.Add(len(res))
	b.n.metrics.appendBytes.Add(bytes)
	b.n.metrics.topicsIn.add(topic, len(res), bytes)
	b.n.metrics.appendLatency.UpdateDuration(start)
	return res, nil
}

// AckNow implements remoting.Backend.
func (b backend) AckNow(end int64) (remoting.AckStatus, bool) {
	st, ok := b.n.host.AckNow(b.n.ackPolicy(), end)
	if !ok {
		return 0, false
	}
	b.n.metrics.ackLatency.Update(0)
	b.n.metrics.ackStatus(st).Inc()
	return st, true
}

// AckAsync implements remoting.Backend: the flush wait and then the
// replication wait run as store and host callbacks (OnFlushed,
// OnReplicated), so a sync acknowledgement costs no goroutine; done runs
// on the flusher's or the replicator's goroutine, or a timer's.
func (b backend) AckAsync(end int64, done func(remoting.AckStatus)) {
	start := time.Now()
	b.n.host.Ack(b.n.ackPolicy(), end, func(st remoting.AckStatus) {
		b.n.metrics.ackLatency.UpdateDuration(start)
		b.n.metrics.ackStatus(st).Inc()
		done(st)
	})
}

// ReadAccess implements remoting.Backend. It is the one place that
// decides whether this node may answer reads from its log:
//
//   - a slave's log trails its master's, connected or not (Trailing: it
//     serves what it holds, but never moves a consumer on the absence of
//     a record or an offset);
//   - a master fenced by its replication plugin — its log is empty at
//     start (start_fenced), it is catching up from a replica that is
//     ahead of it, or it conflicts with one — may lack any record or
//     consumer offset a replica holds (Refused). The plugin lifts the
//     fence only after the catch-up and after merging the replica's
//     consumer offsets (sdk/replication master catchUp), so once it is
//     lifted the log and the offsets are back;
//   - otherwise the log is authoritative.
//
// A fenced slave (the plugin reports every slave fenced for writes) is
// Trailing, not Refused: reads from a slave are what clients fall back to
// while the master is down.
func (b backend) ReadAccess() remoting.ReadAccess {
	if b.n.slave.Load() {
		return remoting.ReadAccess{Trailing: true}
	}
	if fenced, why := b.n.host.Fenced(); fenced {
		return remoting.ReadAccess{Refused: "reads fenced by replication: " + why}
	}
	return remoting.ReadAccess{}
}

// maxDispatchWait bounds how long a pull whose answer would move the
// consumer backwards waits for the dispatcher to reach the visible end of
// the log before it is answered "not yet" (core.NotYetVisible) instead.
const maxDispatchWait = time.Second

// GetMessages implements remoting.Backend. It is the one home of the rule
// "never move a consumer backwards on a queue that may be incomplete":
//
// An answer that would move the consumer backwards (beyondEnd) is only
// given once the consume queue holds everything visible when it was read:
//
//   - the read is repeated after the dispatcher has reached the confirm
//     offset seen after the first read (at most maxDispatchWait); if it
//     has not, the answer is core.NotYetVisible. A
//     master that has just caught up from its replica has its whole log
//     back but its consume queues still being rebuilt: a consumer at
//     offset 500 there must wait, not be moved to the 256 entries
//     dispatched so far;
//   - nor while the log holds records not yet visible (the confirm offset
//     below the committed one): the consumer's offset may be among them;
//   - nor on a slave (ReadAccess Trailing), whose log trails its
//     master's.
func (b backend) GetMessages(ctx context.Context, topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(tagsCode int64) bool) (core.GetResult, error) {
	st := b.store()
	res, err := st.GetMessages(topic, queueID, offset, maxCount, maxBytes, filter)
	if err != nil {
		return res, b.readFailed(topic, queueID, offset, maxCount, err)
	}
	if beyondEnd(res, offset) {
		if p := st.Positions(); p.Dispatched < p.Confirm {
			wctx, cancel := context.WithTimeout(ctx, maxDispatchWait)
			_, werr := st.WaitDispatched(wctx, p.Confirm-1)
			cancel()
			if werr != nil {
				return notYetVisible(res, offset), nil
			}
		}
		if res, err = st.GetMessages(topic, queueID, offset, maxCount, maxBytes, filter); err != nil {
			return res, b.readFailed(topic, queueID, offset, maxCount, err)
		}
		if p := st.Positions(); beyondEnd(res, offset) && (p.Confirm < p.Committed || b.n.slave.Load()) {
			// The log holds records consumers may not see yet (a profile
			// visible after replication whose replica has not acknowledged
			// them, say after a restart or a catch-up, when the replicated
			// offset starts again from what replicas report), or it
			// trails its master's: the consumer's offset may lie among
			// the records this node lacks, so it waits rather than move.
			return notYetVisible(res, offset), nil
		}
	}
	b.n.metrics.pullMsgs.Add(len(res.Sizes))
	return res, nil
}

// beyondEnd reports whether r, the answer to a pull at offset, says that
// offset lies past the end of the queue as this node knows it: the queue
// is missing or empty with an end below offset (NO_MATCHED_LOGIC_QUEUE,
// NO_MESSAGE_IN_QUEUE) or offset > max (OFFSET_OVERFLOW_BADLY). Such an
// answer would move the consumer backwards; it is only right when this
// node's queue is complete, which a node whose dispatcher is behind, or
// whose log trails a replica's, cannot know.
func beyondEnd(r core.GetResult, offset int64) bool {
	switch r.Status {
	case core.OffsetOverflowBadly:
		return true
	case core.NoMatchedLogicQueue, core.NoMessageInQueue:
		return offset > r.NextOffset
	}
	return false
}

// notYetVisible is r turned into "wait at offset": no records, the
// queue's bounds kept.
func notYetVisible(r core.GetResult, offset int64) core.GetResult {
	return core.GetResult{Status: core.NotYetVisible, NextOffset: offset, MinOffset: r.MinOffset, MaxOffset: r.MaxOffset}
}

// QueueOffsets implements remoting.Backend.
func (b backend) QueueOffsets(topic string, queueID int32) (int64, int64) {
	return b.store().MinQueueOffset(topic, queueID), b.store().MaxQueueOffset(topic, queueID)
}

// OffsetByTime implements remoting.Backend.
func (b backend) OffsetByTime(ctx context.Context, topic string, queueID int32, ts int64) (int64, error) {
	return b.store().QueueOffsetByTime(topic, queueID, ts)
}

// ReadMessage implements remoting.Backend: the record is checked whole,
// body CRC included, before it is served (core's ReadRecord checks the
// framing only), so a record damaged in an old segment is reported as
// damaged (remoting.ErrCorrupt, logged and counted once per offset), never
// served as if whole, and never reported as "not found" either.
func (b backend) ReadMessage(ctx context.Context, physOffset int64) ([]byte, error) {
	rec, err := b.n.cache.readRecord(b.store(), physOffset)
	if err == nil {
		_, _, err = record.Check(rec, true)
		if err != nil {
			err = fmt.Errorf("read record at %d: %w", physOffset, err)
		}
	}
	if err != nil {
		if damaged(err) {
			err = wrapCorrupt(err)
			b.n.metrics.readFaults.report(b.n, readFault{phys: physOffset, queue: -1}, err)
			return nil, err
		}
		return nil, err
	}
	return rec, nil
}

// RaiseConsumerOffset implements remoting.Backend with the offset table's
// merge by maximum (the replication path's Apply), which is atomic.
func (b backend) RaiseConsumerOffset(group, topic string, queueID int32, offset int64) error {
	snap := meta.OffsetsSnapshot{Offsets: map[string]map[int32]int64{meta.OffsetKey(topic, group): {queueID: offset}}}
	if _, err := b.store().Meta().ConsumerOffsets.Apply(snap); err != nil {
		return fmt.Errorf("raise offset of group %s on %s/%d to %d: %w", group, topic, queueID, offset, err)
	}
	return nil
}

// QueryMessages implements remoting.Backend: the index's candidates,
// filtered by reading each record's topic and keys (hash collisions).
func (b backend) QueryMessages(ctx context.Context, topic, key string, maxNum int, begin, end int64) (remoting.QueryResult, error) {
	recs, err := b.n.QueryByKey(ctx, topic, key, maxNum, begin, end)
	if err != nil {
		return remoting.QueryResult{}, err
	}
	p := b.store().Positions()
	return remoting.QueryResult{Records: recs, IndexLastUpdateTimestamp: b.store().LastStoreTimestamp(), IndexLastUpdatePhyOffset: p.Dispatched}, nil
}

// ConsumerOffset implements remoting.Backend.
func (b backend) ConsumerOffset(group, topic string, queueID int32) (int64, bool) {
	return b.store().Meta().ConsumerOffsets.Query(group, topic, queueID)
}

// CommitConsumerOffset implements remoting.Backend.
func (b backend) CommitConsumerOffset(group, topic string, queueID int32, offset int64) error {
	return b.store().Meta().ConsumerOffsets.Commit(group, topic, queueID, offset)
}

// MaxReconsumeTimes implements remoting.Backend.
func (b backend) MaxReconsumeTimes(group string) int {
	if g, ok := b.store().Meta().SubscriptionGroups.Get(group); ok && g.RetryMaxTimes > 0 {
		return int(g.RetryMaxTimes)
	}
	return meta.DefaultRetryMaxTimes
}
