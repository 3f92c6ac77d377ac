package cq

import (
	"errors"
)

// Errors returned (possibly wrapped) by this package. Check them with
// errors.Is.
var (
	// ErrQueueOffsetMismatch means Put was asked to write at a queue offset
	// other than the queue's next offset (and the entry was not an already
	// indexed one that could be skipped). The dispatcher and the queue
	// disagree about the queue's contents; the caller must not retry blindly.
	ErrQueueOffsetMismatch = errors.New("cq: queue offset mismatch")
	// ErrInvalidEntry means an entry given to Put is malformed (negative
	// offset, non-positive size, the reserved blank size) or its commitlog
	// offset goes backwards relative to the queue's last entry.
	ErrInvalidEntry = errors.New("cq: invalid entry")
	// ErrOffsetTooSmall means a read asked for a queue offset below Min():
	// the entry was removed by retention or was never stored here.
	ErrOffsetTooSmall = errors.New("cq: queue offset below minimum")
	// ErrOffsetOverflow means a read asked for a queue offset at or beyond
	// Max(): the entry has not been written (yet).
	ErrOffsetOverflow = errors.New("cq: queue offset beyond maximum")
	// ErrClosed means the queue or set was closed.
	ErrClosed = errors.New("cq: closed")
	// ErrInvalidTopic means a topic name breaks meta.ValidateTopicName.
	ErrInvalidTopic = errors.New("cq: invalid topic name")
	// ErrInvalidQueueID means a queue id is outside 0..MaxQueueID.
	ErrInvalidQueueID = errors.New("cq: invalid queue id")
	// ErrCorrupt means the files of a queue cannot be made sense of (a file
	// larger than the configured size, files that are not contiguous); the
	// queue is not opened and an operator (or a rebuild from the commitlog)
	// must intervene.
	ErrCorrupt = errors.New("cq: corrupt queue files")
)
