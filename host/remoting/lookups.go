package remoting

import (
	"context"
	"errors"
	"fmt"
)

func (b *Broker) handleViewMessage(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	phys := e.int(64, -1, "offset")
	if e.err == nil && phys < 0 {
		e.err = errors.New("header field offset is missing")
	}
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	req.Go(func(ctx context.Context) *Command {
		raw, err := b.be.ReadMessage(ctx, phys)
		if errors.Is(err, ErrCorrupt) {
			// The Backend reports the damage to operators.
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("the message at offset %d is damaged and is not served: %v", phys, err))
		}
		if err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("can not find message by the offset %d: %v", phys, err))
		}
		resp := NewResponse(req.Cmd, Success, "")
		resp.Body = raw
		return resp
	})
	return nil
}

func (b *Broker) handleQueryMessage(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	topic, key := e.required("topic"), e.required("key")
	maxNum := int(e.int(32, 32, "maxNum"))
	begin := e.int(64, 0, "beginTimestamp")
	end := e.int(64, 0, "endTimestamp")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if end == 0 {
		end = 1<<63 - 1
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	req.Go(func(ctx context.Context) *Command {
		qr, err := b.be.QueryMessages(ctx, topic, key, max(maxNum, 1), begin, end)
		if err != nil {
			if code, _ := errorResponse(err); code == RequestCodeNotSupported {
				return NewResponse(req.Cmd, code, fmt.Sprintf("query by key is not available: %v", err))
			}
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("query by key: %v", err))
		}
		if len(qr.Records) == 0 {
			return NewResponse(req.Cmd, QueryNotFound, "can not find message, maybe time range not correct")
		}
		resp := NewResponse(req.Cmd, Success, "")
		n := 0
		for _, r := range qr.Records {
			n += len(r)
		}
		body := make([]byte, 0, n)
		for _, r := range qr.Records {
			body = append(body, r...)
		}
		resp.Body = body
		resp.SetExt("indexLastUpdateTimestamp", i64s(qr.IndexLastUpdateTimestamp))
		resp.SetExt("indexLastUpdatePhyoffset", i64s(qr.IndexLastUpdatePhyOffset))
		return resp
	})
	return nil
}
