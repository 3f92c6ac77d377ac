package remoting

import (
	"context"
	"fmt"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
)

// topicHeader reads UPDATE_AND_CREATE_TOPIC's header (RocketMQ's
// CreateTopicRequestHeader): topic, readQueueNums, writeQueueNums and perm
// are required; topicFilterType defaults to SINGLE_TAG, topicSysFlag to 0,
// order to false. defaultTopic is ignored (keel has no template topics).
func topicHeader(cmd *Command) (meta.TopicConfig, error) {
	e := &extReader{cmd: cmd}
	t := meta.TopicConfig{TopicName: e.required("topic")}
	e.required("readQueueNums")
	e.required("writeQueueNums")
	e.required("perm")
	t.ReadQueueNums = int32(e.int(32, 0, "readQueueNums"))
	t.WriteQueueNums = int32(e.int(32, 0, "writeQueueNums"))
	t.Perm = int32(e.int(32, 0, "perm"))
	t.TopicFilterType = e.str("topicFilterType")
	t.TopicSysFlag = int32(e.int(32, 0, "topicSysFlag"))
	t.Order = e.bool("order")
	return t, e.err
}

// handleUpdateAndCreateTopic is UPDATE_AND_CREATE_TOPIC (17): create the
// topic or replace its configuration. A bad header is SYSTEM_ERROR (as
// RocketMQ's header decoding answers), a bad name, a system topic or a
// configuration meta refuses is INVALID_PARAMETER; nothing changes then.
func (b *Broker) handleUpdateAndCreateTopic(req *Request) *Command {
	t, err := topicHeader(req.Cmd)
	if err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding UPDATE_AND_CREATE_TOPIC header: "+err.Error())
	}
	what := "updating topic " + t.TopicName
	if err := checkAdminTopic(t.TopicName); err != nil {
		return adminError(req, what, err)
	}
	if err := b.be.PutTopic(t); err != nil {
		return adminError(req, what, err)
	}
	return NewResponse(req.Cmd, Success, "")
}

// handleDeleteTopicInBroker is DELETE_TOPIC_IN_BROKER (215): remove the
// topic and its consumer offsets. Deleting a topic that does not exist
// succeeds, as in RocketMQ.
func (b *Broker) handleDeleteTopicInBroker(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	topic := e.required("topic")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding DELETE_TOPIC_IN_BROKER header: "+e.err.Error())
	}
	what := "deleting topic " + topic
	if err := checkAdminTopic(topic); err != nil {
		return adminError(req, what, err)
	}
	if _, err := b.be.DeleteTopic(topic); err != nil {
		return adminError(req, what, err)
	}
	return NewResponse(req.Cmd, Success, "")
}

// handleGetAllTopicConfig is GET_ALL_TOPIC_CONFIG (21): the topic table
// as RocketMQ's TopicConfigSerializeWrapper, {"dataVersion":{...},
// "topicConfigTable":{name:{...}}}, standard JSON (string keys).
func (b *Broker) handleGetAllTopicConfig(req *Request) *Command {
	return jsonResponse(req, b.be.TopicSnapshot())
}

// handleGetTopicStatsInfo is GET_TOPIC_STATS_INFO (202): min and max
// offset and last store time of every queue 0..max(read, write)-1 of the
// topic, or TOPIC_NOT_EXIST.
func (b *Broker) handleGetTopicStatsInfo(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	topic := e.required("topic")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding GET_TOPIC_STATS_INFO header: "+e.err.Error())
	}
	t, ok := b.be.Topic(topic)
	if !ok {
		return NewResponse(req.Cmd, TopicNotExist, fmt.Sprintf("topic[%s] not exist", topic))
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	name := b.brokerName()
	req.Go(func(ctx context.Context) *Command {
		n := max(t.ReadQueueNums, t.WriteQueueNums)
		stats := make([]TopicQueueStats, 0, n)
		for q := range n {
			lo, hi := b.be.QueueOffsets(topic, q)
			ts, err := b.storeTimeAt(ctx, topic, q, hi-1)
			if err != nil {
				return NewResponse(req.Cmd, SystemError, fmt.Sprintf("reading the last message of %s/%d: %v", topic, q, err))
			}
			stats = append(stats, TopicQueueStats{Queue: MessageQueue{BrokerName: name, QueueID: q, Topic: topic},
				MinOffset: lo, MaxOffset: hi, LastUpdateTimestamp: ts})
		}
		resp := NewResponse(req.Cmd, Success, "")
		resp.Body = encodeTopicStats(stats)
		return resp
	})
	return nil
}

// storeTimeAt returns the store time of the message at queue offset off
// of topic/q, or 0 when there is none (off < 0, or gone by retention).
func (b *Broker) storeTimeAt(ctx context.Context, topic string, q int32, off int64) (int64, error) {
	if off < 0 {
		return 0, nil
	}
	r, err := b.be.GetMessages(ctx, topic, q, off, 1, 0, nil)
	if err != nil {
		return 0, err
	}
	if len(r.Sizes) == 0 {
		return 0, nil
	}
	_, info, err := record.Check(r.Data[:r.Sizes[0]], false)
	if err != nil {
		return 0, err
	}
	if info.QueueOffset != off { // the message itself is gone
		return 0, nil
	}
	return info.StoreTimestamp, nil
}
