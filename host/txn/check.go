package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// Bounds of one round.
const (
	// batchCount and batchBytes bound one read of the half or op queue.
	batchCount = 64
	batchBytes = 4 << 20
	// maxRound bounds the time one round spends on the half queue
	// (RocketMQ's MAX_PROCESS_TIME_LIMIT).
	maxRound = 60 * time.Second
)

// opEntry is one op record: its own queue offset and the half queue
// offsets it marks decided.
type opEntry struct {
	offset int64
	halves []int64
}

// CheckOnce runs one check round (the loop runs one every Interval):
//
//  1. it reads the op queue from the op progress offset to its end and
//     collects the half queue offsets decided;
//  2. it reads the half queue from the half progress offset, in order,
//     skipping decided records, and stops at the first record stored
//     after the round began (a copy this round appended) or younger than
//     its immunity time (Timeout, or CHECK_IMMUNITY_TIME_IN_SECONDS);
//  3. each undecided record it passes is re-appended to the half queue
//     with TRANSACTION_CHECK_TIMES+1 and the copy is checked with a live
//     producer of its PGROUP (Check), or, once it has been checked
//     MaxChecks times, moved to CheckMaxTopic instead;
//  4. it flushes the log (Flush) and records the new half progress and
//     the op progress (past the op records that name only offsets below
//     the new half progress), and persists them.
//
// A round that fails part way records the progress it made.
func (s *Service) CheckOnce(ctx context.Context) error {
	start := s.cfg.Now()
	halfFrom, _ := s.cfg.Offsets.Query(Group, HalfTopic, queueID)
	opFrom, _ := s.cfg.Offsets.Query(Group, OpTopic, queueID)
	opStart, ops, err := s.readOps(opFrom)
	if err != nil {
		return err
	}
	done := make(map[int64]bool)
	for _, o := range ops {
		for _, h := range o.halves {
			done[h] = true
		}
	}
	halfNext, scanErr := s.scanHalf(ctx, halfFrom, done, start)
	opNext := opStart
	for _, o := range ops {
		if !below(o.halves, halfNext) {
			break
		}
		opNext = o.offset + 1
	}
	if err := s.record(halfFrom, halfNext, opFrom, opNext); err != nil {
		return err
	}
	return scanErr
}

// below reports whether every offset in hs is below limit.
func below(hs []int64, limit int64) bool {
	for _, h := range hs {
		if h >= limit {
			return false
		}
	}
	return true
}

// record flushes the log and commits and persists the progress offsets
// when they moved.
func (s *Service) record(halfFrom, halfNext, opFrom, opNext int64) error {
	if halfNext == halfFrom && opNext == opFrom {
		return nil
	}
	if s.cfg.Flush != nil {
		if err := s.cfg.Flush(); err != nil {
			return fmt.Errorf("flush the log before recording transaction check progress: %w", err)
		}
	}
	if err := s.cfg.Offsets.Commit(Group, HalfTopic, queueID, halfNext); err != nil {
		return fmt.Errorf("record half queue progress %d: %w", halfNext, err)
	}
	if err := s.cfg.Offsets.Commit(Group, OpTopic, queueID, opNext); err != nil {
		return fmt.Errorf("record op queue progress %d: %w", opNext, err)
	}
	if err := s.cfg.Offsets.Persist(); err != nil {
		return fmt.Errorf("persist transaction check progress: %w", err)
	}
	return nil
}

// readOps reads the op queue from offset from to its visible end. It
// returns the offset it really started at (past records retention
// removed) and the op records in queue order. A damaged or malformed op
// record is logged and counts as naming nothing.
func (s *Service) readOps(from int64) (int64, []opEntry, error) {
	start, off := from, from
	var out []opEntry
	for {
		res, err := s.cfg.Log.GetMessages(OpTopic, queueID, off, batchCount, batchBytes, nil)
		if err != nil {
			return start, out, fmt.Errorf("read op queue at %d: %w", off, err)
		}
		switch res.Status {
		case core.Found:
		case core.OffsetTooSmall, core.NoMatchedMessage, core.MessageWasRemoving:
			if res.NextOffset <= off {
				return start, out, nil
			}
			if len(out) == 0 {
				start = res.NextOffset
			}
			off = res.NextOffset
			continue
		default:
			return start, out, nil
		}
		data := res.Data
		q := off
		for _, size := range res.Sizes {
			raw := data[:size]
			data = data[size:]
			e := opEntry{offset: q}
			if rec, err := record.Decode(raw); err != nil {
				s.log.Error("skipping a damaged op record", "queueOffset", q, "err", err)
			} else {
				e.offset = rec.QueueOffset
				if e.halves, err = parseOpBody(rec.Body); err != nil {
					s.log.Error("skipping a malformed op record", "queueOffset", rec.QueueOffset, "err", err)
				}
			}
			out = append(out, e)
			q = e.offset + 1
		}
		off = max(q, res.NextOffset)
	}
}

// scanHalf checks the undecided half records from queue offset from on
// (CheckOnce steps 2 and 3) and returns the offset of the first record it
// did not pass.
func (s *Service) scanHalf(ctx context.Context, from int64, done map[int64]bool, start time.Time) (int64, error) {
	off := from
	// The round checks the half messages dispatched when it began, never
	// the copies it appends itself (their store time is no guide when the
	// clock is not the log's).
	limit := s.cfg.Log.MaxQueueOffset(HalfTopic, queueID)
	for ctx.Err() == nil && off < limit && s.cfg.Now().Sub(start) < maxRound {
		res, err := s.cfg.Log.GetMessages(HalfTopic, queueID, off, batchCount, batchBytes, nil)
		if err != nil {
			return off, fmt.Errorf("read half queue at %d: %w", off, err)
		}
		switch res.Status {
		case core.Found:
		case core.OffsetTooSmall, core.NoMatchedMessage, core.MessageWasRemoving:
			if res.NextOffset <= off {
				return off, nil
			}
			off = res.NextOffset
			continue
		default:
			return off, nil
		}
		data := res.Data
		for _, size := range res.Sizes {
			raw := data[:size]
			data = data[size:]
			if done[off] {
				off++
				continue
			}
			rec, err := record.Decode(raw)
			if err != nil {
				s.log.Error("skipping a damaged half message", "queueOffset", off, "err", err)
				off++
				continue
			}
			off = rec.QueueOffset
			if off >= limit {
				return off, nil // appended after the round began
			}
			if done[off] {
				off++
				continue
			}
			if rec.StoreTimestamp >= start.UnixMilli() {
				return off, nil // a copy this round appended, or newer
			}
			if age := start.Sub(time.UnixMilli(rec.BornTimestamp)); age >= 0 && age <= s.immunity(rec) {
				return off, nil // too young; so, mostly, is the rest
			}
			if err := s.checkHalf(rec); err != nil {
				return off, err
			}
			off++
		}
		off = max(off, res.NextOffset)
	}
	return off, ctx.Err()
}

// checkHalf re-appends rec with one more check and checks the copy, or
// moves rec to CheckMaxTopic when it has had MaxChecks checks.
func (s *Service) checkHalf(rec *record.Record) error {
	n := checkTimes(rec)
	if n >= s.cfg.MaxChecks {
		if _, err := s.cfg.Append([]*record.Message{discarded(rec)}); err != nil {
			return fmt.Errorf("move half message at queue offset %d to %s: %w", rec.QueueOffset, CheckMaxTopic, err)
		}
		s.log.Warn("half message checked too often; moved", "topic", CheckMaxTopic, "queueOffset", rec.QueueOffset,
			"checks", n, "producerGroup", producerGroup(rec))
		return nil
	}
	m := putBack(rec, n+1)
	res, err := s.cfg.Append([]*record.Message{m})
	if err != nil {
		return fmt.Errorf("re-append half message at queue offset %d for its check: %w", rec.QueueOffset, err)
	}
	c, err := checkOf(m, res[0])
	if err != nil {
		s.log.Error("cannot check a half message", "queueOffset", res[0].QueueOffset, "err", err)
		return nil
	}
	group := producerGroup(rec)
	if err := s.cfg.Check(group, c); err != nil {
		s.log.Info("transaction check skipped", "producerGroup", group, "transactionId", c.TransactionID, "err", err)
	}
	return nil
}

// checkOf is the check of the half message copy m stored at r: its
// offsets, its UNIQ_KEY and its record with its real topic and queue.
func checkOf(m *record.Message, r core.AppendResult) (Check, error) {
	topic, q, err := record.RealTarget(m.Properties)
	if err != nil {
		return Check{}, fmt.Errorf("half record at %d: %w", r.PhysOffset, err)
	}
	real := *m
	real.Topic, real.QueueID = topic, q
	buf, err := record.Encode(nil, &real, record.Limits{MaxMessageSize: max(len(m.Body), 1)})
	if err != nil {
		return Check{}, fmt.Errorf("encode check body of the half message at %d: %w", r.PhysOffset, err)
	}
	record.Stamp(buf, r.QueueOffset, r.PhysOffset, r.StoreTimestamp)
	id, _ := record.GetProperty(m.Properties, record.PropertyUniqKey)
	return Check{
		TranStateTableOffset: r.QueueOffset,
		CommitLogOffset:      r.PhysOffset,
		MsgID:                id,
		TransactionID:        id,
		OffsetMsgID:          record.OffsetMsgID(m.StoreHost, r.PhysOffset),
		Record:               buf,
	}, nil
}
