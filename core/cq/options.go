package cq

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/keelmq/keel/core/vfs"
)

// DefaultEntriesPerFile is the number of entries per file when
// Options.EntriesPerFile is zero (RocketMQ's mappedFileSizeConsumeQueue:
// 300000 entries, 6,000,000 bytes).
const DefaultEntriesPerFile = 300000

// MaxTopicLen is the longest topic name, in bytes, a queue accepts.
const MaxTopicLen = 127

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

// ValidateTopic reports whether topic can name a queue directory: non-empty,
// at most MaxTopicLen bytes, no '/', '\\' or NUL, not "." and no "..".
// Characters such as '%' (as in %RETRY%group) are allowed. The error wraps
// ErrInvalidTopic.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	case len(topic) > MaxTopicLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidTopic, len(topic), MaxTopicLen)
	case strings.ContainsAny(topic, "/\\\x00"):
		return fmt.Errorf("%w: %q contains a path separator or NUL", ErrInvalidTopic, topic)
	case topic == "." || strings.Contains(topic, ".."):
		return fmt.Errorf("%w: %q is or contains a relative path element", ErrInvalidTopic, topic)
	}
	return nil
}

func validateQueueID(id int32) error {
	if id < 0 || id > MaxQueueID {
		return fmt.Errorf("%w: %d not in 0..%d", ErrInvalidQueueID, id, MaxQueueID)
	}
	return nil
}
