package remoting

import (
	"context"
	"fmt"
)

func (b *Broker) handleQueryConsumerOffset(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group, topic := e.required("consumerGroup"), e.required("topic")
	q := int32(e.int(32, 0, "queueId"))
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	acc := b.be.ReadAccess()
	if resp := readRefused(req, acc); resp != nil {
		return resp
	}
	off, ok := b.be.ConsumerOffset(group, topic, q)
	if !ok && acc.Trailing {
		// A replica may simply not have received the group's offsets yet:
		// neither "none" nor 0 would be true.
		return NewResponse(req.Cmd, SystemBusy, fmt.Sprintf("this broker is a replica and holds no offset of group %s for %s/%d yet; its master's offsets reach it by metadata sync; try again later", group, topic, q))
	}
	if !ok {
		// RocketMQ answers 0 for a fresh group when the queue still starts
		// at 0, so that a consumer starting from LAST_OFFSET does not skip
		// messages produced just before it started.
		if minOff, _ := b.be.QueueOffsets(topic, q); minOff > 0 {
			return NewResponse(req.Cmd, QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
		}
		off = 0
	}
	resp := NewResponse(req.Cmd, Success, "")
	resp.SetExt("offset", i64s(off))
	return resp
}

func (b *Broker) handleUpdateConsumerOffset(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group, topic := e.required("consumerGroup"), e.required("topic")
	q := int32(e.int(32, 0, "queueId"))
	off := e.int(64, -1, "commitOffset")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if off >= 0 {
		if err := b.commitOffset(b.be.ReadAccess(), group, topic, q, off); err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("committing offset: %v", err))
		}
	}
	return NewResponse(req.Cmd, Success, "")
}

func (b *Broker) queueOffsetReq(req *Request, pick func(min, max int64) int64) *Command {
	e := &extReader{cmd: req.Cmd}
	topic := e.required("topic")
	q := int32(e.int(32, 0, "queueId"))
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	lo, hi := b.be.QueueOffsets(topic, q)
	resp := NewResponse(req.Cmd, Success, "")
	resp.SetExt("offset", i64s(pick(lo, hi)))
	return resp
}

func (b *Broker) handleGetMaxOffset(req *Request) *Command {
	return b.queueOffsetReq(req, func(_, hi int64) int64 { return hi })
}

func (b *Broker) handleGetMinOffset(req *Request) *Command {
	return b.queueOffsetReq(req, func(lo, _ int64) int64 { return lo })
}

func (b *Broker) handleSearchOffset(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	topic := e.required("topic")
	q := int32(e.int(32, 0, "queueId"))
	ts := e.int(64, 0, "timestamp")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	req.Go(func(ctx context.Context) *Command {
		off, err := b.be.OffsetByTime(ctx, topic, q, ts)
		if err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("searching offset by time: %v", err))
		}
		resp := NewResponse(req.Cmd, Success, "")
		resp.SetExt("offset", i64s(off))
		return resp
	})
	return nil
}
