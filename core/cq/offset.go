package cq

import (
	"fmt"
)

// OffsetStatus classifies a consumer's requested queue offset against a
// queue, following RocketMQ's pull-path statuses (see CheckOffset).
type OffsetStatus int

const (
	// OffsetFound: Min() <= offset < Max(); entries can be read there.
	OffsetFound OffsetStatus = iota
	// NoMessageInQueue: the queue has never held an entry (Max() == 0).
	// The suggested next offset is 0; a broker answers PULL_OFFSET_MOVED if
	// the request was not already 0, else PULL_NOT_FOUND.
	NoMessageInQueue
	// OffsetTooSmall: offset < Min() (removed by retention, or a blank).
	// The suggested next offset is Min().
	OffsetTooSmall
	// OffsetOverflowOne: offset == Max(), the normal caught-up case (long
	// poll). The suggested next offset is offset itself.
	OffsetOverflowOne
	// OffsetOverflowBadly: offset > Max(). The suggested next offset is
	// Max(), never 0 (keel corrects beyond-max offsets to max, as RocketMQ
	// 4.9.4+ does).
	OffsetOverflowBadly
)

// String returns the RocketMQ-style name of the status.
func (s OffsetStatus) String() string {
	switch s {
	case OffsetFound:
		return "FOUND"
	case NoMessageInQueue:
		return "NO_MESSAGE_IN_QUEUE"
	case OffsetTooSmall:
		return "OFFSET_TOO_SMALL"
	case OffsetOverflowOne:
		return "OFFSET_OVERFLOW_ONE"
	case OffsetOverflowBadly:
		return "OFFSET_OVERFLOW_BADLY"
	}
	return fmt.Sprintf("OffsetStatus(%d)", int(s))
}

// CheckOffset classifies offset against one consistent snapshot of Min()
// and Max() and returns the offset a consumer should continue from: offset
// itself for OffsetFound and OffsetOverflowOne, 0 for NoMessageInQueue,
// Min() for OffsetTooSmall, Max() for OffsetOverflowBadly. Whether the
// broker applies the correction (on a slave, RocketMQ's offsetCheckInSlave)
// is the caller's decision. Safe for concurrent use.
func (q *Queue) CheckOffset(offset int64) (OffsetStatus, int64) {
	mx := q.max.Load()
	mn := min(q.min.Load(), mx)
	switch {
	case mx == 0:
		return NoMessageInQueue, 0
	case offset < mn:
		return OffsetTooSmall, mn
	case offset == mx:
		return OffsetOverflowOne, offset
	case offset > mx:
		return OffsetOverflowBadly, mx
	}
	return OffsetFound, offset
}
