package remoting

import (
	"context"
	"errors"
	"fmt"

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
		topic := RetryGroupTopicPrefix + group
		if int(rec.ReconsumeTimes) >= maxTimes || delayLevel < 0 {
			topic = DLQGroupTopicPrefix + group
		}
		if _, _, err := ensureTopic(b.be, topic, true, groupTopicQueues); err != nil {
			return NewResponse(req.Cmd, SystemError, err.Error())
		}
		props := rec.Properties
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
