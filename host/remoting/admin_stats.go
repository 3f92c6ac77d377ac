package remoting

import (
	"context"
	"fmt"
	"slices"

	"github.com/keelmq/keel/core/meta"
)

// GroupTopics returns, for every group with committed offsets in s, the
// topics it has offsets for, sorted.
func GroupTopics(s meta.OffsetsSnapshot) map[string][]string {
	out := map[string][]string{}
	for key := range s.Offsets {
		if topic, group, ok := meta.SplitOffsetKey(key); ok {
			out[group] = append(out[group], topic)
		}
	}
	for _, ts := range out {
		slices.Sort(ts)
	}
	return out
}

// ConsumeProgress returns group's progress on every queue
// 0..max(read, write)-1 of each of topics: the queue's max offset and the
// group's committed offset in offsets (0 when it has none), so
// ConsumeQueueStats.Lag is the messages it has still to consume. Topics
// that do not exist are left out; LastTimestamp is not filled (it costs a
// message read). brokerName names the queues.
func ConsumeProgress(be Backend, offsets meta.OffsetsSnapshot, group string, topics []string, brokerName string) []ConsumeQueueStats {
	var out []ConsumeQueueStats
	for _, topic := range topics {
		t, ok := be.Topic(topic)
		if !ok {
			continue
		}
		committed := offsets.Offsets[meta.OffsetKey(topic, group)]
		for q := range max(t.ReadQueueNums, t.WriteQueueNums) {
			_, hi := be.QueueOffsets(topic, q)
			out = append(out, ConsumeQueueStats{
				Queue:          MessageQueue{BrokerName: brokerName, QueueID: q, Topic: topic},
				BrokerOffset:   hi,
				ConsumerOffset: max(committed[q], 0),
			})
		}
	}
	return out
}

// handleGetConsumeStats is GET_CONSUME_STATS (208): header consumerGroup
// (required) and topic. With a topic, the group's progress on it; without,
// on every topic the group has offsets for, less those its live members
// (if any) do not subscribe to, as RocketMQ does. lastTimestamp is the
// store time of the last consumed message.
func (b *Broker) handleGetConsumeStats(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group := e.required("consumerGroup")
	topic := e.str("topic")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding GET_CONSUME_STATS header: "+e.err.Error())
	}
	if err := meta.ValidateGroupName(group); err != nil {
		return adminError(req, "consume stats of "+group, err)
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	offsets := b.be.ConsumerOffsetSnapshot()
	var topics []string
	if topic != "" {
		if _, ok := b.be.Topic(topic); !ok {
			return NewResponse(req.Cmd, TopicNotExist, fmt.Sprintf("topic[%s] not exist", topic))
		}
		topics = []string{topic}
	} else {
		online := len(b.reg.clientIDs(group)) > 0
		for _, t := range GroupTopics(offsets)[group] {
			if _, subscribed := b.reg.subscription(group, t, nil); subscribed || !online {
				topics = append(topics, t)
			}
		}
	}
	stats := ConsumeProgress(b.be, offsets, group, topics, b.brokerName())
	req.Go(func(ctx context.Context) *Command {
		for i := range stats {
			s := &stats[i]
			ts, err := b.storeTimeAt(ctx, s.Queue.Topic, s.Queue.QueueID, s.ConsumerOffset-1)
			if err != nil {
				return NewResponse(req.Cmd, SystemError, fmt.Sprintf("reading the last consumed message of %s/%d: %v", s.Queue.Topic, s.Queue.QueueID, err))
			}
			s.LastTimestamp = ts
		}
		resp := NewResponse(req.Cmd, Success, "")
		resp.Body = encodeConsumeStats(stats)
		return resp
	})
	return nil
}

// kvTable is GET_BROKER_RUNTIME_INFO's body (RocketMQ's KVTable).
type kvTable struct {
	Table map[string]string `json:"table"`
}

// handleGetBrokerRuntimeInfo is GET_BROKER_RUNTIME_INFO (28): the keys of
// RocketMQ's runtime table the Backend can fill truly (RuntimeInfo).
func (b *Broker) handleGetBrokerRuntimeInfo(req *Request) *Command {
	info := b.be.RuntimeInfo()
	if info == nil {
		info = map[string]string{}
	}
	return jsonResponse(req, kvTable{info})
}
