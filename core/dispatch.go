package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/keelmq/keel/core/cq"
	"github.com/keelmq/keel/core/record"
)

const dispatchBatch = 1024

// dispatchLoop tails the commitlog up to the confirm offset, feeding the
// consume queues and listeners. Master and slave run the same loop: a slave
// dispatches what replication appended.
//
// A failed pass is retried after dispatchRetryMin, doubling to
// dispatchRetryMax while it keeps failing (a full disk, a plugin that is
// restarting). Its error is logged when it first happens or changes, then
// at most every dispatchLogEvery with the number of retries, and once more
// when a pass succeeds again: a failure that lasts is visible without
// flooding the log.
func (s *Store) dispatchLoop() {
	// One timer for the loop's life: a pass can follow every append, and a
	// time.After per pass costs a timer and an allocation each.
	idle := time.NewTimer(time.Second)
	defer idle.Stop()
	var (
		retry      time.Duration // the next retry's delay; 0 while passes succeed
		retries    int           // failed passes in a row
		lastMsg    string        // the error last logged
		lastLogged time.Time     // when it was
	)
	for {
		c1 := s.committedN.wait()
		c2 := s.confirmN.wait()
		n, err := s.dispatchOnce()
		if err != nil {
			msg := err.Error()
			s.dispatchFail.Store(&msg)
			retries++
			if msg != lastMsg || time.Since(lastLogged) >= dispatchLogEvery {
				s.log.Error("dispatch failed; retrying", "dispatched", s.dispatched.Load(), "retries", retries, "err", err)
				lastMsg, lastLogged = msg, time.Now()
			}
			retry = min(max(2*retry, dispatchRetryMin), dispatchRetryMax)
			select {
			case <-s.stop:
				return
			case <-time.After(retry):
			}
			continue
		}
		if s.dispatchFail.Load() != nil {
			s.dispatchFail.Store(nil)
			s.log.Info("dispatch recovered", "dispatched", s.dispatched.Load(), "failed_passes", retries)
			retry, retries, lastMsg = 0, 0, ""
		}
		if n > 0 {
			continue
		}
		select {
		case <-s.stop:
			return
		case <-c1:
		case <-c2:
		case <-idle.C: // a ConfirmSource that forgot to notify
		}
		idle.Reset(time.Second)
	}
}

// The dispatch loop's retry delays and how often a lasting failure is
// logged again (dispatchLoop).
const (
	dispatchRetryMin = 100 * time.Millisecond
	dispatchRetryMax = 2 * time.Second
	dispatchLogEvery = 30 * time.Second
)

// dispatchOnce dispatches records from the dispatched offset up to the
// confirm offset (at most one segment, and batches of dispatchBatch records
// to listeners), returning the number of bytes it advanced.
func (s *Store) dispatchOnce() (int64, error) {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	from := s.dispatched.Load()
	target := s.confirmOffset()
	if from >= target {
		return 0, nil
	}
	seg := s.segmentFor(from)
	if seg == nil {
		return 0, fmt.Errorf("dispatch from %d: no segment holds it", from)
	}
	end := min(target, seg.start+s.opts.SegmentSize)
	defer s.dropListenerBatch() // what a failed pass left
	pos := from
	var lastTs int64
	err := seg.view(from-seg.start, end-from, func(b []byte) error {
		for off := 0; off < len(b); {
			size, info, err := s.dispatchCheck.Check(b[off:], false)
			if err != nil {
				return fmt.Errorf("dispatch record at %d in %s: %w", pos, seg.path, err)
			}
			if info.Blank {
				pos = seg.start + s.opts.SegmentSize
				return nil
			}
			if err := s.dispatchToQueue(info, pos); err != nil {
				return err
			}
			if err := s.batchForListeners(info); err != nil {
				return err
			}
			lastTs = info.StoreTimestamp
			off += size
			pos += int64(size)
		}
		return nil
	})
	if err == nil {
		err = s.flushListenerBatch()
	}
	// Entries already put into queues are idempotent to redo; only advance
	// what fully succeeded.
	if pos > from && err == nil {
		s.dispatched.Store(pos)
		if invariants {
			s.assertAscending("dispatch", namedPos{"min", s.minOffset.Load()}, namedPos{"dispatched", pos}, namedPos{"confirm", target})
			s.assertAscending("dispatch", namedPos{"dispatched", pos}, namedPos{"committed", s.committed.Load()})
		}
		if lastTs > 0 {
			s.dispatchTs.Store(lastTs)
		}
		s.dispatchedN.notify()
		s.afterProgress()
	}
	if err != nil && errors.Is(err, ErrOffset) {
		return 0, err
	}
	return pos - from, err
}

// dispatchToQueue puts the record info, at pos, into its consume queue,
// if it takes a queue offset. A record whose topic the consume queues
// refuse (it breaks meta.ValidateTopicName) is skipped (see
// skipInvalidTopic) rather than failed, since retrying could never
// succeed. dispatchMu is held.
func (s *Store) dispatchToQueue(info record.Info, pos int64) error {
	if !countsInQueue(info.SysFlag) {
		return nil
	}
	q, err := s.cqs.GetOrCreate(info.Topic, info.QueueID)
	if errors.Is(err, cq.ErrInvalidTopic) {
		s.skipInvalidTopic(info.Topic, pos, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("dispatch record at %d: %w", pos, err)
	}
	if err := q.Put(info.QueueOffset, cqEntry(info)); err != nil {
		return fmt.Errorf("dispatch record at %d to %s/%d: %w", pos, info.Topic, info.QueueID, err)
	}
	return nil
}

// skipInvalidTopic logs, once per topic for the store's life, that the
// records of topic, the first at pos, get no consume queue entry. Append
// and AppendRaw refuse such topics and recovery treats one as damage, so
// only a log written before the rule applied (when a name such as "a.b"
// was accepted) can hold one, beyond recovery's verify window: its records
// stay in the log and reach the listeners, but consumers cannot pull them.
// dispatchMu is held.
func (s *Store) skipInvalidTopic(topic string, pos int64, err error) {
	if s.skippedTopics[topic] {
		return
	}
	if s.skippedTopics == nil {
		s.skippedTopics = map[string]bool{}
	}
	s.skippedTopics[topic] = true
	s.log.Error("dispatch: skipping records whose topic breaks the topic name rule; they get no consume queue entry",
		"topic", topic, "offset", pos, "err", err)
}

// batchForListeners adds the record info to the listeners' batch (none
// without listeners) and hands the batch to them when it holds
// dispatchBatch records. The batch's buffer is reused across passes
// (listeners do not keep it): a pass may carry a single record.
// dispatchMu is held.
func (s *Store) batchForListeners(info record.Info) error {
	if len(s.opts.Listeners) == 0 {
		return nil
	}
	if s.dispatchBuf == nil {
		s.dispatchBuf = make([]DispatchRecord, 0, 64)
	}
	s.dispatchBuf = append(s.dispatchBuf, DispatchRecord{
		Topic: info.Topic, QueueID: info.QueueID, QueueOffset: info.QueueOffset,
		PhysOffset: info.PhysOffset, Size: info.Size, TagsCode: info.TagsCode,
		StoreTimestamp: info.StoreTimestamp, SysFlag: info.SysFlag,
		Keys: info.Keys, UniqKey: info.UniqKey,
	})
	if len(s.dispatchBuf) == dispatchBatch {
		return s.flushListenerBatch()
	}
	return nil
}

// flushListenerBatch hands the batch to every listener, in order, and
// empties it. dispatchMu is held.
func (s *Store) flushListenerBatch() error {
	if len(s.dispatchBuf) == 0 {
		return nil
	}
	for _, l := range s.opts.Listeners {
		if err := l.Dispatch(s.dispatchBuf); err != nil {
			return fmt.Errorf("dispatch listener: %w", err)
		}
	}
	s.dropListenerBatch()
	return nil
}

// dropListenerBatch empties the batch; the reused buffer must not pin the
// records' strings. dispatchMu is held.
func (s *Store) dropListenerBatch() {
	clear(s.dispatchBuf)
	s.dispatchBuf = s.dispatchBuf[:0]
}

// RedispatchFromCheckpoint makes the dispatcher feed queues and listeners
// again from the last checkpoint's dispatched offset, the point below
// which every listener has synced. A host calls it after restarting a
// listener that lost its unsynced state (a crashed external indexer);
// queues and listeners are idempotent, so records they kept are skipped.
func (s *Store) RedispatchFromCheckpoint() {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	s.ckptMu.Lock()
	from := s.ckpt.last.Dispatched
	s.ckptMu.Unlock()
	// Under appendMu, so that retention (Store.deletable) cannot move the
	// minimum past the rewound offset meanwhile.
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	from = max(from, s.minOffset.Load())
	if from < s.dispatched.Load() {
		s.log.Info("re-dispatching from the last checkpoint", "from", from, "dispatched", s.dispatched.Load())
		s.dispatched.Store(from)
		if invariants {
			s.assertOrder("redispatch")
		}
	}
	s.confirmN.notify()
}
