package remoting

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/keelmq/keel/core/record"
)

func (b *Broker) handleSendBack(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group := e.required("group")
	phys := e.int(64, -1, "offset")
	delayLevel := int(e.int(32, 0, "delayLevel"))
	originMsgID := e.str("originMsgId")
	maxTimes := int(e.int(32, -1, "maxReconsumeTimes"))
	if e.err == nil && phys < 0 {
		e.err = errors.New("header field offset is missing")
	}
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if maxTimes < 0 {
		maxTimes = b.maxReconsume(group)
	}
	req.Go(func(ctx context.Context) *Command {
		raw, err := b.be.ReadMessage(ctx, phys)
		if err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("look message by offset %d failed: %v", phys, err))
		}
		rec, err := record.Decode(raw)
		if err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("decoding message at offset %d: %v", phys, err))
		}
		topic, level := sendBackTarget(group, rec.ReconsumeTimes, maxTimes, delayLevel)
		if _, _, err := ensureTopic(b.be, topic, true, groupTopicQueues); err != nil {
			return NewResponse(req.Cmd, SystemError, err.Error())
		}
		// The retry waits its delay level in the schedule topic (the
		// backend's Append moves a message with DELAY there); a DLQ copy
		// is not delayed.
		props := record.RemoveProperty(rec.Properties, record.PropertyDelayLevel)
		if level > 0 {
			props = record.SetProperty(props, record.PropertyDelayLevel, strconv.Itoa(level))
		}
		if _, ok := record.GetProperty(props, record.PropertyRetryTopic); !ok && record.CheckProperty(record.PropertyRetryTopic, rec.Topic) == nil {
			props = record.SetProperty(props, record.PropertyRetryTopic, rec.Topic)
		}
		if originMsgID == "" {
			if id, ok := record.GetProperty(props, record.PropertyOriginMsgID); ok {
				originMsgID = id
			} else {
				originMsgID = record.OffsetMsgID(rec.StoreHost, rec.PhysOffset)
			}
		}
		if record.CheckProperty(record.PropertyOriginMsgID, originMsgID) == nil {
			props = record.SetProperty(props, record.PropertyOriginMsgID, originMsgID)
		}
		m := &record.Message{
			Topic:          topic,
			QueueID:        0,
			Flag:           rec.Flag,
			Body:           rec.Body,
			Properties:     props,
			SysFlag:        rec.SysFlag,
			BornTimestamp:  rec.BornTimestamp,
			BornHost:       rec.BornHost,
			StoreHost:      b.storeHost(req.Conn),
			ReconsumeTimes: rec.ReconsumeTimes + 1,
		}
		res, err := b.be.Append(ctx, []*record.Message{m})
		if err != nil {
			return b.appendError(req, err)
		}
		if len(res) == 1 {
			awaitAck(ctx, b.be, res[0].End())
		}
		return NewResponse(req.Cmd, Success, "")
	})
	return nil
}

// retryBaseDelayLevel is the delay level of a consumer's first retry when
// the client names none: level 3 (10 s by default), then one level more
// per reconsume, as RocketMQ's consumerSendMsgBack.
const retryBaseDelayLevel = 3

// sendBackTarget is where CONSUMER_SEND_MSG_BACK puts a message consumed
// reconsumeTimes times that the client sent back with delayLevel: the
// group's dead letter topic, undelayed (level 0), once reconsumeTimes
// reaches maxTimes or when delayLevel < 0; otherwise the group's retry
// topic at delayLevel, or at retryBaseDelayLevel + reconsumeTimes when
// delayLevel is 0. A level above the table's last is clamped when the
// message is stored.
func sendBackTarget(group string, reconsumeTimes int32, maxTimes, delayLevel int) (topic string, level int) {
	if int(reconsumeTimes) >= maxTimes || delayLevel < 0 {
		return DLQGroupTopicPrefix + group, 0
	}
	if delayLevel == 0 {
		delayLevel = retryBaseDelayLevel + int(reconsumeTimes)
	}
	return RetryGroupTopicPrefix + group, delayLevel
}
