package core

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/keelmq/keel/core/cq"
	"github.com/keelmq/keel/core/record"
)

func cqEntry(info record.Info) cq.Entry {
	return cq.Entry{Offset: info.PhysOffset, Size: info.Size, TagsCode: info.TagsCode}
}

// ReadRecord returns a copy of the whole record stored at physical offset
// off, which must be a record boundary below the committed offset.
func (s *Store) ReadRecord(off int64) ([]byte, error) {
	if off < s.minOffset.Load() || off >= s.committed.Load() {
		return nil, fmt.Errorf("read record at %d (log is [%d,%d)): %w", off, s.minOffset.Load(), s.committed.Load(), ErrOffset)
	}
	seg := s.segmentFor(off)
	if seg == nil {
		return nil, fmt.Errorf("read record at %d: no segment: %w", off, ErrOffset)
	}
	var out []byte
	err := seg.view(off-seg.start, min(s.committed.Load(), seg.start+s.opts.SegmentSize)-off, func(b []byte) error {
		size, info, err := record.Check(b, false)
		if err != nil {
			return fmt.Errorf("read record at %d: %w: %w", off, ErrOffset, err)
		}
		if info.Blank || info.PhysOffset != off {
			return fmt.Errorf("read record at %d: not a record boundary: %w", off, ErrOffset)
		}
		out = append([]byte(nil), b[:size]...)
		return nil
	})
	return out, err
}

// readSized copies size bytes at off, checking the record there claims to
// be that size (a consume queue entry's view of the record).
func (s *Store) readSized(off int64, size int32, dst []byte) ([]byte, error) {
	seg := s.segmentFor(off)
	if seg == nil {
		return dst, fmt.Errorf("read %d bytes at %d: %w", size, off, ErrOffset)
	}
	start := len(dst)
	dst = append(dst, make([]byte, size)...)
	if err := seg.readAt(dst[start:], off); err != nil {
		return dst[:start], err
	}
	if int32(binary.BigEndian.Uint32(dst[start:])) != size {
		return dst[:start], fmt.Errorf("record at %d is not %d bytes (queue entry stale): %w", off, size, errSizeMismatch)
	}
	return dst, nil
}

// storeTimestampAt returns the STORETIMESTAMP of the record at off.
func (s *Store) storeTimestampAt(off int64, size int32) (int64, error) {
	b, err := s.readSized(off, size, nil)
	if err != nil {
		return 0, err
	}
	r, err := record.Decode(b)
	if err != nil {
		return 0, fmt.Errorf("decode record at %d: %w", off, err)
	}
	return r.StoreTimestamp, nil
}

// ReadLog returns committed log bytes from offset from, which must be a
// record boundary: whole records only (at least one, even if larger than
// maxBytes), never crossing a segment. A BLANK record ending a segment is
// returned whole (its 8-byte header and the zero padding up to the segment
// end), so a receiver appending the bytes at the same offset rolls to the
// next segment exactly as the sender did. It returns nil when from is the
// committed offset. Replication streams with it. The result is a fresh
// copy; ReadLogInto reuses a caller's buffer instead.
func (s *Store) ReadLog(from int64, maxBytes int) ([]byte, error) {
	out, err := s.ReadLogInto(from, maxBytes, nil)
	if len(out) == 0 {
		return nil, err
	}
	return out, err
}

// ReadLogInto is ReadLog into dst: it copies the same bytes ReadLog would
// return into dst[:0], growing it only when its capacity is too small,
// and returns the filled slice (empty when from is the committed offset).
// The caller owns the result and may reuse it (as the next call's dst)
// once it no longer needs the bytes: a stream reading frame after frame
// allocates nothing in steady state. On error the returned slice is
// dst[:0].
func (s *Store) ReadLogInto(from int64, maxBytes int, dst []byte) ([]byte, error) {
	dst = dst[:0]
	committed := s.committed.Load()
	if from == committed {
		return dst, nil
	}
	if from < s.minOffset.Load() || from > committed {
		return dst, fmt.Errorf("read log at %d (log is [%d,%d)): %w", from, s.minOffset.Load(), committed, ErrOffset)
	}
	seg := s.segmentFor(from)
	if seg == nil {
		return dst, fmt.Errorf("read log at %d: no segment: %w", from, ErrOffset)
	}
	end := min(committed, seg.start+s.opts.SegmentSize)
	out := dst
	err := seg.view(from-seg.start, end-from, func(b []byte) error {
		n, _, err := wholeRecords(b, maxBytes, false)
		if err != nil {
			return fmt.Errorf("read log at %d: %w", from+int64(n), err)
		}
		out = append(dst, b[:n]...)
		return nil
	})
	if err != nil {
		return dst, err
	}
	return out, nil
}

// wholeRecords is ReadLog's rule for how much of b, which starts at a
// record boundary, one read returns: n is the length of its first whole
// record and of the whole records after it while they fit in maxBytes,
// ending after a BLANK record (a segment's end). With partial, b may end
// inside a record (a prefix of the log): a record after the first that b
// does not hold whole ends the walk, and a first one does with n 0, need
// the bytes that record takes (0 when b is too short to tell) and err
// wrapping record.ErrIncomplete. Any other damage is err, with n the
// offset in b of the record that failed.
func wholeRecords(b []byte, maxBytes int, partial bool) (n, need int, err error) {
	for n < len(b) {
		size, info, err := record.Check(b[n:], false)
		if err != nil {
			if partial && errors.Is(err, record.ErrIncomplete) {
				if n > 0 {
					return n, 0, nil
				}
				return 0, size, err
			}
			return n, 0, err
		}
		if n > 0 && n+size > maxBytes {
			break
		}
		n += size
		if info.Blank {
			break
		}
	}
	return n, 0, nil
}

// GetStatus is the outcome of GetMessages, mirroring RocketMQ's
// GetMessageStatus. It is also the broker's pull status (host/remoting
// turns it into a response code): NotYetVisible is never returned by
// Store.GetMessages, only by a reader that knows its queue may be
// incomplete.
type GetStatus int

const (
	Found               GetStatus = iota // records returned
	NoMessageInQueue                     // the queue exists but is empty
	NoMatchedLogicQueue                  // no such queue
	OffsetTooSmall                       // offset < min: NextOffset = min
	OffsetOverflowOne                    // offset == max: caught up, NextOffset = offset
	OffsetOverflowBadly                  // offset > max: NextOffset = max (never 0 unless empty)
	NoMatchedMessage                     // entries exist but none passed the filter
	MessageWasRemoving                   // entries point below the commitlog minimum
	// NotYetVisible: offset may lie inside the queue although this
	// node's consume queue does not reach it yet (its dispatcher is
	// behind the visible end of the log, or its log trails a replica's);
	// NextOffset is offset. A caught-up consumer waits there; it is never
	// moved.
	NotYetVisible
)

var statusNames = [...]string{"FOUND", "NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE", "OFFSET_TOO_SMALL",
	"OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING", "NOT_YET_VISIBLE"}

// String returns RocketMQ's name for g (the remark of a pull answer).
func (g GetStatus) String() string {
	if int(g) < len(statusNames) {
		return statusNames[g]
	}
	return fmt.Sprintf("GetStatus(%d)", int(g))
}

// GetResult is what GetMessages found.
type GetResult struct {
	Status     GetStatus
	NextOffset int64 // where the consumer should pull next
	MinOffset  int64
	MaxOffset  int64
	// Data holds the stored records back to back, unchanged (the wire
	// format of a pull response body); Sizes their lengths. Each record
	// carries its own queue offset.
	Data  []byte
	Sizes []int32
}

// GetMessages reads up to maxCount records (and about maxBytes bytes, at
// least one record) of topic/queueID from queue offset offset, skipping
// entries whose tags code filter rejects (filter nil accepts all). Offsets
// out of range are corrected, never to 0 unless the queue is empty.
func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(tagsCode int64) bool) (GetResult, error) {
	q := s.cqs.Get(topic, queueID)
	if q == nil {
		st := NoMatchedLogicQueue
		return GetResult{Status: st, NextOffset: 0}, nil
	}
	lo, hi := q.Min(), q.Max()
	res := GetResult{MinOffset: lo, MaxOffset: hi}
	switch {
	case hi == 0 || lo == hi:
		res.Status, res.NextOffset = NoMessageInQueue, hi
		if hi == 0 {
			res.NextOffset = 0
		}
		return res, nil
	case offset < lo:
		res.Status, res.NextOffset = OffsetTooSmall, lo
		return res, nil
	case offset == hi:
		res.Status, res.NextOffset = OffsetOverflowOne, offset
		return res, nil
	case offset > hi:
		res.Status, res.NextOffset = OffsetOverflowBadly, hi
		return res, nil
	}
	if maxCount <= 0 {
		maxCount = 32
	}
	entries, err := q.Get(offset, maxCount, nil)
	if err != nil {
		return res, fmt.Errorf("read consume queue %s/%d at %d: %w", topic, queueID, offset, err)
	}
	minPhys := s.minOffset.Load()
	next := offset
	removing := false
	for i, e := range entries {
		next = offset + int64(i) + 1
		if e.IsBlank() {
			continue // pre-filled gap of a slave that started mid-stream
		}
		if e.Offset < minPhys {
			removing = true
			continue
		}
		if filter != nil && !filter(e.TagsCode) {
			continue
		}
		if len(res.Sizes) > 0 && len(res.Data)+int(e.Size) > maxBytes {
			next--
			break
		}
		d, err := s.readSized(e.Offset, e.Size, res.Data)
		if err != nil {
			if errors.Is(err, ErrOffset) && e.Offset < s.minOffset.Load() {
				removing = true
				continue
			}
			return res, &ReadError{Topic: topic, QueueID: queueID, QueueOffset: offset + int64(i), PhysOffset: e.Offset, Err: err}
		}
		res.Data = d
		res.Sizes = append(res.Sizes, e.Size)
	}
	res.NextOffset = next
	switch {
	case len(res.Sizes) > 0:
		res.Status = Found
	case removing:
		res.Status = MessageWasRemoving
	default:
		res.Status = NoMatchedMessage
	}
	return res, nil
}

// MinQueueOffset and MaxQueueOffset bound a queue; both are 0 for an
// unknown queue. Max is the next offset to be dispatched.
func (s *Store) MinQueueOffset(topic string, queueID int32) int64 {
	if q := s.cqs.Get(topic, queueID); q != nil {
		return q.Min()
	}
	return 0
}

// MaxQueueOffset: see MinQueueOffset.
func (s *Store) MaxQueueOffset(topic string, queueID int32) int64 {
	if q := s.cqs.Get(topic, queueID); q != nil {
		return q.Max()
	}
	return 0
}

// QueueOffsetByTime returns the queue offset of the first message stored
// at or after ts (Unix ms); Max when none is.
func (s *Store) QueueOffsetByTime(topic string, queueID int32, ts int64) (int64, error) {
	q := s.cqs.Get(topic, queueID)
	if q == nil {
		return 0, nil
	}
	return q.SearchTime(ts, func(e cq.Entry) (int64, error) { return s.storeTimestampAt(e.Offset, e.Size) })
}

// Queues calls fn for every consume queue (topic, queue id, min, max).
func (s *Store) Queues(fn func(topic string, queueID int32, min, max int64) bool) {
	s.cqs.Each(func(q *cq.Queue) bool { return fn(q.Topic(), q.QueueID(), q.Min(), q.Max()) })
}
