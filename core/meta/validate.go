package meta

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error that rejects an argument or a
// snapshot because it breaks a documented rule (name syntax, queue count,
// negative offset...). Nothing is changed when it is returned.
var ErrInvalid = errors.New("invalid metadata")

// Limits on names and queue counts, as RocketMQ's Validators and
// TopicValidator enforce them.
const (
	// MaxTopicNameLen is the longest topic name, in bytes.
	MaxTopicNameLen = 127
	// MaxGroupNameLen is the longest consumer group name, in bytes.
	MaxGroupNameLen = 255
	// MaxQueueNums is the largest read or write queue count of a topic.
	MaxQueueNums = 1024
)

// validNameChar reports whether c may appear in a topic or group name:
// RocketMQ's set ^[%|a-zA-Z0-9_-]+$.
func validNameChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '_', c == '-', c == '%', c == '|':
		return true
	}
	return false
}

func validateName(kind, name string, max int) error {
	if len(name) == 0 {
		return invalidName(fmt.Sprintf("empty %s name", kind))
	}
	if len(name) > max {
		return invalidName(fmt.Sprintf("%s name %.40q... is %d bytes, longer than %d", kind, name, len(name), max))
	}
	for i := 0; i < len(name); i++ {
		if !validNameChar(name[i]) {
			return invalidName(fmt.Sprintf("%s name %q has character %q at byte %d; allowed are A-Z a-z 0-9 _ - %% |", kind, name, name[i], i))
		}
	}
	return nil
}

// invalidName is a name the rules reject. Its text is the reason alone
// (the broker sends it to clients as the remark), and it matches
// ErrInvalid.
type invalidName string

func (e invalidName) Error() string        { return string(e) }
func (e invalidName) Is(target error) bool { return target == ErrInvalid }

// ValidateTopicName returns nil if name is 1..MaxTopicNameLen bytes of
// [A-Za-z0-9_%|-], and an error wrapping ErrInvalid otherwise.
func ValidateTopicName(name string) error { return validateName("topic", name, MaxTopicNameLen) }

// ValidateGroupName returns nil if name is 1..MaxGroupNameLen bytes of
// [A-Za-z0-9_%|-], and an error wrapping ErrInvalid otherwise.
func ValidateGroupName(name string) error { return validateName("group", name, MaxGroupNameLen) }
