package cq

import (
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/vfs"
)

// DefaultEntriesPerFile is the number of entries per file when
// Options.EntriesPerFile is zero (RocketMQ's mappedFileSizeConsumeQueue:
// 300000 entries, 6,000,000 bytes).
const DefaultEntriesPerFile = 300000

// MaxQueueID is the largest queue id.
const MaxQueueID = 65535

// Options configure queues and sets.
type Options struct {
	// FS is the filesystem all files are accessed through. Required.
	FS vfs.FS
	// EntriesPerFile is the number of entries in each queue file; zero
	// means DefaultEntriesPerFile. It must not change between runs over the
	// same files (OpenQueue refuses files of another size).
	EntriesPerFile int
	// Logger receives recovery and maintenance messages; nil means
	// slog.Default().
	Logger *slog.Logger
}

func (o Options) normalize() (Options, error) {
	if o.FS == nil {
		return o, errors.New("cq: Options.FS is nil")
	}
	if o.EntriesPerFile == 0 {
		o.EntriesPerFile = DefaultEntriesPerFile
	}
	if o.EntriesPerFile < 0 || int64(o.EntriesPerFile) > math.MaxInt32/EntrySize {
		return o, fmt.Errorf("cq: Options.EntriesPerFile %d out of range", o.EntriesPerFile)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// validateTopic applies the one topic name rule, meta.ValidateTopicName
// (RocketMQ's: 1..meta.MaxTopicNameLen bytes of [A-Za-z0-9_%|-], so every
// valid name is also a safe directory name). The error wraps both
// ErrInvalidTopic and meta.ErrInvalid.
func validateTopic(topic string) error {
	if err := meta.ValidateTopicName(topic); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	return nil
}

func validateQueueID(id int32) error {
	if id < 0 || id > MaxQueueID {
		return fmt.Errorf("%w: %d not in 0..%d", ErrInvalidQueueID, id, MaxQueueID)
	}
	return nil
}
