package core

import (
	"errors"
	"fmt"
	"sync"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
)

// AppendResult is where a record was stored.
type AppendResult struct {
	PhysOffset     int64
	Size           int32
	QueueOffset    int64
	StoreTimestamp int64
}

// End is the offset just past the record: an ack waits until flushed or
// replicated offsets reach it.
func (r AppendResult) End() int64 { return r.PhysOffset + int64(r.Size) }

var encPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Append stores one message. See AppendBatch.
func (s *Store) Append(m *record.Message) (AppendResult, error) {
	var one [1]AppendResult
	res, err := s.AppendBatch([]*record.Message{m}, one[:0])
	if err != nil {
		return AppendResult{}, err
	}
	return res[0], nil
}

// AppendBatch stores msgs contiguously in one segment and appends their
// results to dst. Either all are stored or none (errors: ErrMessage with the
// record package's reason, ErrDiskFull, ErrReadOnly, ErrClosed; with a
// write buffer also ErrMessage for a batch over half of it). A topic that
// breaks meta.ValidateTopicName, the rule the consume queues apply, is an
// ErrMessage that also wraps record.ErrInvalid and meta.ErrInvalid: such a
// record could never be dispatched. On return the
// records are committed (readable, replicable) but not necessarily
// flushed: wait with WaitFlushed when the policy needs durability. With a
// write buffer they are only written: Commit, or under CommitOnWait a
// WaitCommitted, commits them.
func (s *Store) AppendBatch(msgs []*record.Message, dst []AppendResult) ([]AppendResult, error) {
	if len(msgs) == 0 {
		return dst, nil
	}
	bp := encPool.Get().(*[]byte)
	defer encPool.Put(bp)
	base := len(dst)
	buf, dst, err := s.encodeBatch((*bp)[:0], msgs, dst)
	*bp = buf
	if err != nil {
		return dst[:base], err
	}
	if err := s.Writable(); err != nil {
		return dst[:base], err
	}
	if err := s.awaitTailRoom(); err != nil {
		return dst[:base], err
	}

	s.appendMu.Lock()
	if s.closed.Load() {
		s.appendMu.Unlock()
		return dst[:base], ErrClosed
	}
	if err := s.ensureRoomLocked(int64(len(buf))); err != nil {
		s.appendMu.Unlock()
		return dst[:base], err
	}
	if s.wb != nil {
		if err := s.wbRoomLocked(int64(len(buf))); err != nil {
			s.appendMu.Unlock()
			return dst[:base], err
		}
	}
	now := s.opts.Now()
	pos := s.wrotePos
	s.stampLocked(msgs, buf, dst[base:], pos, now)
	s.wrotePos = pos + int64(len(buf))
	s.lastTs.Store(now)
	if s.wb != nil {
		s.wbPutLocked(pos, buf, 0)
		s.wb.wrote.Store(s.wrotePos)
		if invariants {
			s.assertOrder("append")
		}
		s.appendMu.Unlock()
		s.wroteN.notify()
		return dst, nil
	}
	copy(s.active.data[pos-s.active.start:], buf)
	s.setCommitted(s.wrotePos)
	if invariants {
		s.assertOrder("append")
	}
	s.maybeWarmLocked()
	s.appendMu.Unlock()
	s.committedN.notify()
	s.afterCommit()
	return dst, nil
}

// encodeBatch encodes msgs back to back into buf and appends to dst one
// result each, holding the record's offset within buf and its size. The
// batch must fit a segment, and half the write buffer if there is one
// (ErrMessage). On error dst may hold results for part of msgs.
func (s *Store) encodeBatch(buf []byte, msgs []*record.Message, dst []AppendResult) ([]byte, []AppendResult, error) {
	lim := record.Limits{MaxMessageSize: s.opts.MaxMessageSize}
	for i, m := range msgs {
		if i == 0 || m.Topic != msgs[i-1].Topic {
			if err := checkTopic(m.Topic); err != nil {
				return buf, dst, err
			}
		}
		start := len(buf)
		var err error
		buf, err = record.Encode(buf, m, lim)
		if err != nil {
			return buf, dst, fmt.Errorf("append to %s: %w: %w", m.Topic, ErrMessage, err)
		}
		dst = append(dst, AppendResult{PhysOffset: int64(start), Size: int32(len(buf) - start)})
	}
	if int64(len(buf))+record.BlankSize > s.opts.SegmentSize {
		return buf, dst, fmt.Errorf("batch of %d bytes does not fit a segment: %w", len(buf), ErrMessage)
	}
	if s.wb != nil && 2*(int64(len(buf))+record.BlankSize) > int64(len(s.wb.ring)) {
		return buf, dst, fmt.Errorf("batch of %d bytes exceeds half the %d-byte write buffer: %w", len(buf), len(s.wb.ring), ErrMessage)
	}
	return buf, dst, nil
}

// checkTopic refuses a message whose topic breaks meta.ValidateTopicName:
// the error wraps ErrMessage, record.ErrInvalid and meta.ErrInvalid. It
// costs a pass over the name's bytes (about as much as one map lookup), so
// AppendBatch runs it once per run of messages to the same topic rather
// than keeping a cache of names.
func checkTopic(topic string) error {
	if err := meta.ValidateTopicName(topic); err != nil {
		return fmt.Errorf("append to %q: %w: %w: %w", topic, ErrMessage, record.ErrInvalid, err)
	}
	return nil
}

// stampLocked gives the encoded batch buf, to be stored at pos, its queue
// offsets, physical offsets and store timestamp now, in the records and in
// res (encodeBatch's results for msgs). appendMu is held.
func (s *Store) stampLocked(msgs []*record.Message, buf []byte, res []AppendResult, pos, now int64) {
	for i, m := range msgs {
		r := &res[i]
		rec := buf[r.PhysOffset : r.PhysOffset+int64(r.Size)]
		qo := int64(0)
		if countsInQueue(m.SysFlag) {
			k := queueKey{m.Topic, m.QueueID}
			qo = s.queueOffsets[k]
			s.queueOffsets[k] = qo + 1
		}
		r.PhysOffset = pos + r.PhysOffset
		r.QueueOffset = qo
		r.StoreTimestamp = now
		record.Stamp(rec, qo, r.PhysOffset, now)
	}
}

// countsInQueue reports whether a record gets a consume queue entry and a
// queue offset: transaction prepared and rollback records do not.
func countsInQueue(sysFlag int32) bool {
	t := record.TransactionType(sysFlag)
	return t != record.SysFlagTransactionPrepared && t != record.SysFlagTransactionRollback
}

// ensureRoomLocked makes the active segment able to take n more bytes plus
// a BLANK, rolling to the next segment (padding this one) when it cannot.
func (s *Store) ensureRoomLocked(n int64) error {
	if s.active != nil {
		rel := s.wrotePos - s.active.start
		if rel+n+record.BlankSize <= s.opts.SegmentSize {
			return nil
		}
	}
	if s.wb != nil && s.active != nil {
		// Room for the padding that closes the active segment.
		if err := s.wbRoomLocked(s.opts.SegmentSize - (s.wrotePos - s.active.start)); err != nil {
			return err
		}
	}
	var nextStart int64
	if s.active == nil {
		nextStart = s.wrotePos - s.wrotePos%s.opts.SegmentSize
	} else {
		nextStart = s.active.start + s.opts.SegmentSize
	}
	next, err := s.pre.take(nextStart)
	if err != nil {
		if errors.Is(err, vfs.ErrNoSpace) {
			return fmt.Errorf("roll to segment %d: %w: %w", nextStart, ErrDiskFull, err)
		}
		return fmt.Errorf("roll to segment %d: %w", nextStart, err)
	}
	if s.active != nil {
		if rel := s.wrotePos - s.active.start; rel < s.opts.SegmentSize {
			pad := s.opts.SegmentSize - rel
			if s.wb != nil {
				var hdr [record.BlankSize]byte
				record.PutBlank(hdr[:], int32(pad))
				s.wbPutLocked(s.wrotePos, hdr[:], int(pad)-record.BlankSize)
			} else {
				record.PutBlank(s.active.data[rel:], int32(pad))
			}
		}
		s.wrotePos = next.start
		if s.wb != nil {
			s.wb.wrote.Store(s.wrotePos)
		}
	}
	if s.wrotePos < next.start {
		s.wrotePos = next.start
	}
	s.addSegment(next)
	s.active = next
	s.pre.ahead(next.start + s.opts.SegmentSize)
	return nil
}

func (s *Store) addSegment(seg *segment) {
	old := *s.segs.Load()
	n := make([]*segment, len(old), len(old)+1)
	copy(n, old)
	n = append(n, seg)
	s.segs.Store(&n)
}
