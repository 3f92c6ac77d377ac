package timer

import (
	"fmt"
	"time"
)

// MaxSlots bounds the wheel: MaxDelay/Precision at most this many ticks
// (the wheel file holds twice as many 32-byte slots).
const MaxSlots = 10_000_000

// CheckSettings validates a precision and a maximum delay (profile keys
// store.timer_precision and store.timer_max_delay): the precision is one
// of RocketMQ's 100ms, 200ms, 500ms or 1s; the maximum delay at least one
// precision and at most MaxSlots of them.
func CheckSettings(precision, maxDelay time.Duration) (precisionErr, maxDelayErr error) {
	switch precision {
	case 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second:
	default:
		precisionErr = fmt.Errorf("%v is not a timer precision (want 100ms, 200ms, 500ms or 1s)", precision)
		return precisionErr, nil
	}
	if maxDelay < precision || maxDelay/precision > MaxSlots {
		maxDelayErr = fmt.Errorf("%v is out of range (want %v to %v at precision %v)", maxDelay, precision, precision*MaxSlots, precision)
	}
	return nil, maxDelayErr
}
