package remoting

import (
	"context"
	"fmt"
	"strconv"
)

// resetRequest is INVOKE_BROKER_TO_RESET_OFFSET's header (RocketMQ's
// ResetOffsetRequestHeader).
type resetRequest struct {
	topic, group string
	// timestamp is the time to reset to, Unix milliseconds; -1 means each
	// queue's max offset (skip everything).
	timestamp int64
	// force lets the reset move offsets forward; without it a queue whose
	// committed offset is already below the target keeps its offset.
	force bool
	// queueID limits the reset to one queue (5.x); -1 means every queue.
	queueID int32
	// offset, when hasOffset (5.x, with a queueID), is the target itself
	// instead of the time lookup.
	offset    int64
	hasOffset bool
}

// resetHeader reads the header: topic, group, timestamp and isForce are
// required (@CFNotNull in RocketMQ); queueId defaults to -1; offset is
// optional and only used with a queueId.
func resetHeader(cmd *Command) (resetRequest, error) {
	e := &extReader{cmd: cmd}
	r := resetRequest{topic: e.required("topic"), group: e.required("group")}
	e.required("timestamp")
	r.timestamp = e.int(64, 0, "timestamp")
	force := e.required("isForce")
	r.queueID = int32(e.int(32, -1, "queueId"))
	if v := e.str("offset"); v != "" {
		r.offset, r.hasOffset = e.int(64, 0, "offset"), true
	}
	if e.err != nil {
		return r, e.err
	}
	f, err := strconv.ParseBool(force)
	if err != nil {
		return r, fmt.Errorf("header field isForce=%q is not a boolean", force)
	}
	r.force = f
	if r.timestamp < -1 {
		return r, fmt.Errorf("header field timestamp=%d is negative (only -1, meaning the max offset, is)", r.timestamp)
	}
	if r.hasOffset && r.queueID < 0 {
		return r, fmt.Errorf("header field offset needs a queueId")
	}
	return r, nil
}

// QueueOffset is one entry of a ResetOffsetBody: a queue and the offset a
// group's consumers are to consume from next.
type QueueOffset struct {
	Queue  MessageQueue
	Offset int64
}

// resetTarget is where the reset moves group's offset on topic/q: the
// first message stored at or after r.timestamp (the max for -1), or
// r.offset, within the queue's [min, max]; without r.force a committed
// offset already at or below that stays where it is, as RocketMQ's
// Broker2Client.resetOffset keeps it. A queue with no committed offset
// takes the target. changed reports whether the commit differs from what
// is stored.
func (b *Broker) resetTarget(ctx context.Context, r resetRequest, q int32) (target int64, changed bool, err error) {
	lo, hi := b.be.QueueOffsets(r.topic, q)
	switch {
	case r.hasOffset:
		target = r.offset
	case r.timestamp == -1:
		target = hi
	default:
		if target, err = b.be.OffsetByTime(ctx, r.topic, q, r.timestamp); err != nil {
			return 0, false, fmt.Errorf("searching %s/%d for time %d: %w", r.topic, q, r.timestamp, err)
		}
	}
	target = min(max(target, lo), hi)
	cur, has := b.be.ConsumerOffset(r.group, r.topic, q)
	if has && !r.force && cur <= target {
		return cur, false, nil
	}
	return target, !has || cur != target, nil
}

// handleInvokeBrokerToResetOffset is INVOKE_BROKER_TO_RESET_OFFSET (222).
// For each queue of the topic (0..max(read, write)-1, or the one queueId
// names) it computes resetTarget, commits the new offsets for the group
// (so a group with no live consumer is reset too, as RocketMQ 5's
// server-side reset does), pushes RESET_CONSUMER_CLIENT_OFFSET (220) to
// every live member's connection (RocketMQ 4's client-side reset, which
// rocketmq-client-go handles: it drops the queues' pending messages and
// pulls again from the new offsets) and answers SUCCESS with the
// ResetOffsetBody of every queue.
//
// Refusals: a bad header is SYSTEM_ERROR, an unknown topic
// TOPIC_NOT_EXIST, a queueId outside the topic INVALID_PARAMETER, a group
// with no committed offset on the topic and no live member SYSTEM_ERROR
// (RocketMQ: the consumer group does not exist); a slave answers
// SERVICE_NOT_AVAILABLE (its offsets are its master's), a fenced master
// SYSTEM_BUSY. Nothing changes on a refusal.
func (b *Broker) handleInvokeBrokerToResetOffset(req *Request) *Command {
	r, err := resetHeader(req.Cmd)
	if err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding INVOKE_BROKER_TO_RESET_OFFSET header: "+err.Error())
	}
	t, ok := b.be.Topic(r.topic)
	if !ok {
		return NewResponse(req.Cmd, TopicNotExist, fmt.Sprintf("topic[%s] not exist", r.topic))
	}
	n := max(t.ReadQueueNums, t.WriteQueueNums)
	if r.queueID >= n {
		return NewResponse(req.Cmd, InvalidParameter, fmt.Sprintf("resetting %s on %s: queueId %d is not below the topic's %d queues", r.group, r.topic, r.queueID, n))
	}
	acc := b.be.ReadAccess()
	if resp := readRefused(req, acc); resp != nil {
		return resp
	}
	if acc.Trailing {
		return NewResponse(req.Cmd, ServiceNotAvailable, "resetting offsets: this node's offsets are a copy of its master's (a slave); reset on the master")
	}
	online := len(b.reg.clientIDs(r.group)) > 0
	if !online && !b.hasOffsets(r.group, r.topic, n) {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("the consumer group <%s> has no offsets on topic %s and no live consumer", r.group, r.topic))
	}
	name := b.brokerName()
	req.Go(func(ctx context.Context) *Command {
		var table []QueueOffset
		for q := range n {
			if r.queueID >= 0 && q != r.queueID {
				continue
			}
			off, changed, err := b.resetTarget(ctx, r, q)
			if err != nil {
				return NewResponse(req.Cmd, SystemError, "resetting offsets: "+err.Error())
			}
			if changed {
				if err := b.be.CommitConsumerOffset(r.group, r.topic, q, off); err != nil {
					return NewResponse(req.Cmd, SystemError, fmt.Sprintf("resetting offsets: committing %d for %s on %s/%d: %v", off, r.group, r.topic, q, err))
				}
			}
			table = append(table, QueueOffset{Queue: MessageQueue{BrokerName: name, QueueID: q, Topic: r.topic}, Offset: off})
		}
		body := EncodeResetOffsetBody(table)
		b.pushReset(r, body)
		b.log.Info("remoting: consumer offsets reset", "group", r.group, "topic", r.topic, "timestamp", r.timestamp, "force", r.force, "queues", len(table), "online", online)
		resp := NewResponse(req.Cmd, Success, "")
		resp.Body = body
		return resp
	})
	return nil
}

// hasOffsets reports whether group has a committed offset on any of the
// first n queues of topic.
func (b *Broker) hasOffsets(group, topic string, n int32) bool {
	for q := range n {
		if _, ok := b.be.ConsumerOffset(group, topic, q); ok {
			return true
		}
	}
	return false
}

// pushReset sends RESET_CONSUMER_CLIENT_OFFSET (220, oneway; header topic,
// group, timestamp; body the ResetOffsetBody) to every connection of
// r.group's live members, without blocking the caller.
func (b *Broker) pushReset(r resetRequest, body []byte) {
	conns := b.reg.conns(r.group)
	for _, c := range conns {
		cmd := &Command{Code: CodeResetConsumerClientOffset, Flag: FlagOneway, Language: ServerLanguage, Version: ServerVersion,
			ExtFields: Fields{{"topic", r.topic}, {"group", r.group}, {"timestamp", i64s(r.timestamp)}}, Body: body}
		if err := c.Send(cmd); err != nil {
			b.log.Debug("remoting: reset offset push failed", "conn", c.String(), "group", r.group, "err", err)
		}
	}
}

// EncodeResetOffsetBody writes a ResetOffsetBody,
// {"offsetTable":{<MessageQueue>:offset,...}}, with fastjson's object keys
// (RocketMQ's Broker2Client sends this form; rocketmq-client-go parses
// it), queues sorted.
func EncodeResetOffsetBody(table []QueueOffset) []byte {
	return encodeQueueTable(table, func(q QueueOffset) MessageQueue { return q.Queue }, func(dst []byte, q QueueOffset) []byte {
		return strconv.AppendInt(dst, q.Offset, 10)
	})
}

// DecodeResetOffsetBody reads a ResetOffsetBody (fastjson's object-keyed
// form, or the same table with its keys as JSON strings); an offset that
// is not an integer is an error.
func DecodeResetOffsetBody(body []byte) ([]QueueOffset, error) {
	var out []QueueOffset
	err := decodeQueueTable(body, func(q MessageQueue, v []byte) error {
		off, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("offset %q is not an integer", v)
		}
		out = append(out, QueueOffset{Queue: q, Offset: off})
		return nil
	})
	return out, err
}
