package schedule

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// levelLoop delivers one level's schedule queue in order.
type levelLoop struct {
	s      *Service
	r      *runState
	level  int32
	delay  time.Duration
	durCtx context.Context // ends the durability retries

	// next is the schedule queue offset of the next record to look at; it
	// runs ahead of the committed offset by the deliveries not yet durable.
	// Only the loop's goroutine uses it.
	next int64
	// commit turns durable deliveries into the level's offset.
	commit *committer

	wake     chan struct{} // Notify's signal to an idle loop
	notified atomic.Int64  // the highest end Notify reported
}

// idle, as a step's wait: nothing to do until notified or rechecked.
const idle = time.Duration(-1)

func (l *levelLoop) notify(end int64) {
	for {
		cur := l.notified.Load()
		if end <= cur || l.notified.CompareAndSwap(cur, end) {
			break
		}
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// loop runs steps until ctx ends, waiting between them as each says.
func (l *levelLoop) loop(ctx context.Context) {
	l.next, _ = l.s.cfg.Offsets.Get(l.level)
	for ctx.Err() == nil {
		wait, err := l.step()
		if err != nil {
			l.s.log.Warn("delay level delivery", "err", err)
			wait = retryAfter
		}
		l.wait(ctx, wait)
	}
}

// wait waits d (0: not at all), or, when d is idle, until notified and the
// notified record is dispatched, or idleRecheck.
func (l *levelLoop) wait(ctx context.Context, d time.Duration) {
	switch {
	case d == 0:
		return
	case d > 0:
		sleep(ctx, d)
		return
	}
	t := time.NewTimer(idleRecheck)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-l.wake:
		wctx, cancel := context.WithTimeout(ctx, idleRecheck)
		l.s.cfg.Log.WaitDispatched(wctx, l.notified.Load()-1)
		cancel()
	}
}

// step reads the queue at l.next and delivers what is due; it returns how
// long to wait before the next step.
func (l *levelLoop) step() (time.Duration, error) {
	res, err := l.s.cfg.Log.GetMessages(Topic, QueueID(l.level), l.next, batchCount, batchBytes, nil)
	if err != nil {
		return 0, l.errorf("read schedule queue at %d: %w", l.next, err)
	}
	switch res.Status {
	case core.Found:
		return l.deliver(res)
	case core.OffsetTooSmall:
		l.s.log.Warn("delayed messages were deleted by retention before they were due", "level", l.level,
			"from", l.next, "to", res.NextOffset)
		l.skipTo(res.NextOffset)
		return 0, nil
	case core.NoMatchedMessage, core.MessageWasRemoving:
		l.skipTo(res.NextOffset)
		return 0, nil
	case core.OffsetOverflowBadly:
		return l.beyondEnd(res.MaxOffset), nil
	}
	return idle, nil // no queue yet, empty, or caught up
}

// beyondEnd handles an offset past the queue's end. While the dispatcher
// is behind, the queue is still growing to it: wait. Once it has caught
// up, the log lost the records the offset counted (it was cut, or this
// node took over from a master whose log held more): as RocketMQ's
// correctDelayOffset does, the level restarts at the queue's end, so
// that new delayed messages are not skipped.
func (l *levelLoop) beyondEnd(max int64) time.Duration {
	if p := l.s.cfg.Log.Positions(); p.Dispatched < p.Committed || !l.commit.idle() {
		return idle
	}
	l.s.log.Warn("delay offset is beyond the schedule queue's end; restarting the level at the end", "level", l.level,
		"offset", l.next, "end", max)
	l.next = max
	l.commit = newCommitter(l.commit.set)
	l.commit.set(max)
	return 0
}

// skipTo moves past records that need no delivery.
func (l *levelLoop) skipTo(next int64) {
	if next > l.next {
		l.commit.confirm(l.commit.add(next))
		l.next = next
	}
}

// deliver appends the due prefix of res (records in queue order) to their
// real queues and waits until the first record not yet due is.
func (l *levelLoop) deliver(res core.GetResult) (time.Duration, error) {
	now := l.s.cfg.Now()
	nowMs, delayMs := now.UnixMilli(), l.delay.Milliseconds()
	wait := time.Duration(0)
	next := l.next
	var msgs []*record.Message
	data := res.Data
	all := true
	for _, size := range res.Sizes {
		raw := data[:size]
		data = data[size:]
		rec, err := record.Decode(raw)
		if err != nil {
			if len(msgs) == 0 && next == l.next {
				return 0, l.skipDamaged(err)
			}
			all = false
			break // deliver what came before; the next step starts at it
		}
		due := rec.StoreTimestamp + delayMs
		if due > nowMs+delayMs {
			due = nowMs // the clock went back: due now (RocketMQ's correctDeliverTimestamp)
		}
		if due > nowMs {
			wait = time.UnixMilli(due).Sub(now)
			all = false
			break
		}
		m, err := Deliver(rec)
		if err != nil {
			l.s.log.Error("dropping an undeliverable delayed message", "level", l.level, "queueOffset", rec.QueueOffset, "err", err)
		} else {
			msgs = append(msgs, m)
		}
		next = rec.QueueOffset + 1
	}
	if all {
		next = max(next, res.NextOffset)
	}
	if len(msgs) == 0 {
		l.skipTo(next)
		return wait, nil
	}
	out, err := l.s.cfg.Append(msgs)
	if err != nil {
		return 0, l.errorf("deliver %d message(s) from schedule queue offset %d: %w", len(msgs), l.next, err)
	}
	seq := l.commit.add(next)
	l.next = next
	l.awaitDurable(out[len(out)-1].End(), seq)
	l.r.wantFlush()
	return wait, nil
}

// skipDamaged steps over the damaged record at l.next, which cannot be
// delivered (its bytes are not a message), after logging why.
func (l *levelLoop) skipDamaged(cause error) error {
	one, err := l.s.cfg.Log.GetMessages(Topic, QueueID(l.level), l.next, 1, batchBytes, nil)
	if err != nil {
		return l.errorf("re-read damaged schedule record at %d: %w", l.next, errors.Join(cause, err))
	}
	l.s.log.Error("dropping a damaged delayed message", "level", l.level, "queueOffset", l.next, "err", cause)
	l.skipTo(max(one.NextOffset, l.next+1))
	return nil
}

// awaitDurable confirms addition seq once the log up to end is durable,
// trying again every retryAfter until it is or the run is drained.
func (l *levelLoop) awaitDurable(end int64, seq uint64) {
	l.s.cfg.Durable(end, func(ok bool) {
		if ok {
			l.commit.confirm(seq)
			return
		}
		if l.durCtx.Err() != nil {
			return
		}
		time.AfterFunc(retryAfter, func() {
			if l.durCtx.Err() == nil {
				l.awaitDurable(end, seq)
			}
		})
	})
}
