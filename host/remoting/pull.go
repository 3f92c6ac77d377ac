package remoting

import (
	"context"
	"fmt"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/host/filter"
)

// Pull request sysFlag bits (RocketMQ PullSysFlag).
const (
	pullFlagCommitOffset = 1
	pullFlagSuspend      = 2
	pullFlagSubscription = 4
)

type pullHeader struct {
	group          string
	topic          string
	queueID        int32
	offset         int64
	maxMsgs        int
	sysFlag        int
	commitOffset   int64
	suspend        time.Duration
	subscription   string
	expressionType string
	subVersion     int64
}

func parsePullHeader(cmd *Command) (pullHeader, error) {
	e := &extReader{cmd: cmd}
	h := pullHeader{
		group:          e.required("consumerGroup"),
		topic:          e.required("topic"),
		queueID:        int32(e.int(32, 0, "queueId")),
		offset:         e.int(64, 0, "queueOffset"),
		maxMsgs:        int(e.int(32, DefaultMaxPullCount, "maxMsgNums")),
		sysFlag:        int(e.int(32, 0, "sysFlag")),
		commitOffset:   e.int(64, -1, "commitOffset"),
		suspend:        time.Duration(e.int(64, 0, "suspendTimeoutMillis")) * time.Millisecond,
		subscription:   e.str("subscription"),
		expressionType: e.str("expressionType"),
		subVersion:     e.int(64, 0, "subVersion"),
	}
	return h, e.err
}

// pullResponse builds the response for res per the store reference §9.6
// table, and reports whether the consumer is caught up (a candidate for
// long polling). It only maps: whether an answer may move the consumer
// backwards is the Backend's to decide (GetMessages answers
// core.NotYetVisible where it may not).
func pullResponse(req *Request, h *pullHeader, res core.GetResult) (resp *Command, caughtUp bool) {
	next := res.NextOffset
	var code int16
	switch res.Status {
	case core.Found:
		code = Success
	case core.OffsetOverflowOne, core.NotYetVisible:
		// Caught up (or not yet here): wait at the requested offset.
		code, next, caughtUp = PullNotFound, h.offset, true
	case core.NoMessageInQueue, core.NoMatchedLogicQueue:
		// Empty or missing queue: next is its max (0 if never written).
		if h.offset == next {
			code, caughtUp = PullNotFound, true
		} else {
			code = PullOffsetMoved
		}
	case core.OffsetTooSmall:
		code = PullOffsetMoved
	case core.OffsetOverflowBadly:
		// Corrected to max, never to 0 unless the queue is empty.
		code, next = PullOffsetMoved, res.MaxOffset
	case core.NoMatchedMessage, core.MessageWasRemoving:
		code = PullRetryImmediately
	default:
		code = SystemError
	}
	resp = NewResponse(req.Cmd, code, "")
	if code != Success {
		resp.Remark = res.Status.String()
	}
	resp.SetExt("nextBeginOffset", i64s(next))
	resp.SetExt("minOffset", i64s(res.MinOffset))
	resp.SetExt("maxOffset", i64s(res.MaxOffset))
	resp.SetExt("suggestWhichBrokerId", "0")
	if code == Success {
		resp.Body = res.Data
	}
	return resp, caughtUp
}

// readRefused is the SYSTEM_BUSY answer to a read request on a node that
// must not answer from its log (ReadAccess.Refused), or nil.
func readRefused(req *Request, acc ReadAccess) *Command {
	if acc.Refused == "" {
		return nil
	}
	return NewResponse(req.Cmd, SystemBusy, "this broker's log may be behind its replica; try again later: "+acc.Refused)
}

// commitOffset stores a consumer offset commit: as given on a node whose
// log is authoritative, only where it raises the stored offset while acc
// says the node's offsets may be incomplete.
func (b *Broker) commitOffset(acc ReadAccess, group, topic string, q int32, off int64) error {
	if acc.keepsOffsetsUp() {
		return b.be.RaiseConsumerOffset(group, topic, q, off)
	}
	return b.be.CommitConsumerOffset(group, topic, q, off)
}

// handlePull answers PULL_MESSAGE in steps: parse, commit the piggy-backed
// offset, check the topic and the subscription, then read. A pull whose
// data is already there is answered on the read goroutine; one that may
// have to wait (the consumer is caught up, or the read may block on the
// dispatcher) runs on its own goroutine (pull).
func (b *Broker) handlePull(req *Request) *Command {
	h, err := parsePullHeader(req.Cmd)
	if err != nil {
		return NewResponse(req.Cmd, SystemError, err.Error())
	}
	acc := b.be.ReadAccess()
	if resp := readRefused(req, acc); resp != nil {
		// The consumer's progress is kept (raised only) for when the
		// node can answer again; the pull itself is refused.
		b.commitPulled(acc, &h)
		return resp
	}
	p, resp := b.pullPlan(req, &h)
	if resp != nil {
		return resp
	}
	b.commitPulled(acc, &h)
	if _, hi := b.be.QueueOffsets(h.topic, h.queueID); h.offset < hi {
		// Data is there: one read, no goroutine, unless it turns out
		// the consumer is caught up after all (retention, a filter).
		if resp, wait := b.pullRound(req, &h, p, acc); !wait {
			return resp
		}
	}
	req.Go(func(ctx context.Context) *Command { return b.pull(ctx, req, &h, p, acc) })
	return nil
}

// pullPlan is what a pull reads, fixed before its first round.
type pullPlan struct {
	maxMsgs int
	filter  func(tagsCode int64) bool
	// sql, when set, is evaluated on each record read (the consume
	// queue's tags code cannot answer SQL92).
	sql     *filter.Selector
	suspend time.Duration // 0: answer at once
}

// pullPlan checks the pull's topic and subscription and returns what to
// read, or the response refusing the pull.
func (b *Broker) pullPlan(req *Request, h *pullHeader) (pullPlan, *Command) {
	t, ok := b.be.Topic(h.topic)
	if !ok {
		return pullPlan{}, NewResponse(req.Cmd, TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", h.topic))
	}
	if t.Perm != 0 && t.Perm&meta.PermRead == 0 {
		return pullPlan{}, NewResponse(req.Cmd, NoPermission, fmt.Sprintf("the topic[%s] pulling message is forbidden", h.topic))
	}
	var sub subscription
	posted := h.sysFlag&pullFlagSubscription != 0 && h.subscription != ""
	if posted {
		sub = parseSubscription(h.topic, h.subscription, h.expressionType)
	} else if s, ok := b.reg.subscription(h.group, h.topic, req.Conn); ok {
		sub = s
	}
	p := pullPlan{maxMsgs: min(max(h.maxMsgs, 1), b.cfg.MaxPullCount), filter: sub.filter()}
	if sub.isSQL() {
		sel, resp := sqlSelector(req.Cmd, h.group, sub, posted, h.subVersion, !b.cfg.DisablePropertyFilter)
		if resp != nil {
			return pullPlan{}, resp
		}
		p.sql = sel
	}
	if h.sysFlag&pullFlagSuspend != 0 {
		p.suspend = min(h.suspend, b.cfg.MaxSuspend)
	}
	return p, nil
}

// commitPulled stores the consumer offset a pull carries, if it carries one.
func (b *Broker) commitPulled(acc ReadAccess, h *pullHeader) {
	if h.sysFlag&pullFlagCommitOffset == 0 || h.commitOffset < 0 {
		return
	}
	if err := b.commitOffset(acc, h.group, h.topic, h.queueID, h.commitOffset); err != nil {
		b.log.Warn("remoting: committing offset piggy-backed on pull", "group", h.group, "topic", h.topic, "queue", h.queueID, "err", err)
	}
}

// pullRound reads once for a pull and reports whether the pull should be
// held (the consumer is caught up and asked to wait) rather than answered
// with resp.
func (b *Broker) pullRound(req *Request, h *pullHeader, p pullPlan, acc ReadAccess) (resp *Command, wait bool) {
	if resp := readRefused(req, acc); resp != nil {
		return resp, false
	}
	res, err := b.be.GetMessages(req.Context(), h.topic, h.queueID, h.offset, p.maxMsgs, b.cfg.MaxPullBytes, p.filter)
	if err != nil {
		// The consumer retries this read every few seconds; the
		// Backend reports the failure to operators once.
		b.log.Debug("remoting: pull read failed", "topic", h.topic, "queue", h.queueID, "offset", h.offset, "err", err)
		return NewResponse(req.Cmd, SystemError, err.Error()), false
	}
	if p.sql != nil {
		res = filterSQL(res, p.sql)
	}
	resp, caughtUp := pullResponse(req, h, res)
	return resp, caughtUp && p.suspend > 0
}

// pull runs a pull, holding it up to p.suspend while the consumer is
// caught up. Each round registers with WaitForData before reading, so an
// append between the read and the wait cannot be missed. acc is the
// ReadAccess handlePull was given, the first round's.
func (b *Broker) pull(ctx context.Context, req *Request, h *pullHeader, p pullPlan, acc ReadAccess) *Command {
	var deadline <-chan time.Time
	for round := 0; ; round++ {
		var wake <-chan struct{}
		stop := func() {}
		if p.suspend > 0 {
			wake, stop = b.be.WaitForData(h.topic, h.queueID, h.offset)
		}
		// Asked again every later round: a held pull must not outlive a
		// fence that rose meanwhile.
		if round > 0 {
			acc = b.be.ReadAccess()
		}
		resp, wait := b.pullRound(req, h, p, acc)
		if !wait {
			stop()
			return resp
		}
		if deadline == nil {
			timer := time.NewTimer(p.suspend)
			defer timer.Stop()
			deadline = timer.C
		}
		select {
		case <-wake:
			stop()
		case <-deadline:
			stop()
			return resp
		case <-b.stop:
			// Shutting down: answer "nothing new" now, so the consumer
			// does not sit out its pull timeout on a connection that is
			// about to close, and reconnects at once.
			stop()
			return resp
		case <-ctx.Done():
			stop()
			return nil
		}
	}
}
