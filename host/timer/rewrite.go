package timer

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/schedule"
	"github.com/keelmq/keel/host/txn"
)

// Topic is RocketMQ's timer topic: a timer message is stored there, in
// queue 0, until it is due. Clients may not send to it.
const Topic = "rmq_sys_wheel_timer"

// Property names of timer messages (RocketMQ MessageConst), core/record's.
const (
	// PropertyDelayMS is a relative delay in milliseconds (client).
	PropertyDelayMS = record.PropertyTimerDelayMS
	// PropertyOutMS is the due time, epoch milliseconds, that the broker
	// sets on the timer topic's record.
	PropertyOutMS = record.PropertyTimerOutMS
)

// Default rules (RocketMQ's timerMaxDelaySec and timerPrecisionMs).
const (
	DefaultMaxDelay  = 3 * 24 * time.Hour
	DefaultPrecision = time.Second
)

// ErrDisabled is returned by Rewrite for a timer message when timer
// messages are turned off (the broker answers SYSTEM_ERROR, as RocketMQ's
// WHEEL_TIMER_NOT_ENABLE is seen by clients).
var ErrDisabled = errors.New("timer messages are disabled on this broker (store.timer_enable = false)")

// Rule is what Rewrite checks a timer message against.
type Rule struct {
	// Enabled turns timer messages on; off, Rewrite refuses them.
	Enabled bool
	// MaxDelay is the longest delay accepted, measured from the rewrite.
	MaxDelay time.Duration
}

// Rewrite turns m into its timer record when it carries one of
// TIMER_DELAY_SEC, TIMER_DELAY_MS or TIMER_DELIVER_MS (read in that order,
// the first present wins, as in RocketMQ), and returns its due time in
// epoch milliseconds; it returns 0 and leaves m alone otherwise.
//
// Left alone as well: a message already rewritten into the schedule topic
// (a delay level wins over a timer; schedule.Levels.Rewrite runs first), a
// transaction half message or rollback, and a message whose due time is
// not after now, which is stored as a normal message and so delivered at
// once, as in RocketMQ.
//
// The rewrite sets TIMER_OUT_MS to the due time (not rounded: delivery is
// never early), REAL_TOPIC and REAL_QID to m's topic and queue, and moves
// m to Topic, queue 0. A value that is not an integer, or a due time more
// than r.MaxDelay after now, is an error wrapping record.ErrInvalid (the
// broker answers MESSAGE_ILLEGAL); a timer message while r is not Enabled
// is ErrDisabled. m.Properties is replaced, never modified in place.
func (r Rule) Rewrite(m *record.Message, now time.Time) (dueMs int64, err error) {
	if m.Topic == schedule.Topic || m.Topic == txn.HalfTopic {
		return 0, nil // parked already: a delay level wins over a timer, and a half message is timed only once committed
	}
	name, v, ok := timerProperty(m.Properties)
	if !ok {
		return 0, nil
	}
	switch record.TransactionType(m.SysFlag) {
	case record.SysFlagTransactionPrepared, record.SysFlagTransactionRollback:
		return 0, nil
	}
	if !r.Enabled {
		return 0, ErrDisabled
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("property %s is %q, not an integer: %w", name, v, record.ErrInvalid)
	}
	nowMs := now.UnixMilli()
	switch name {
	case record.PropertyTimerDelaySec:
		dueMs = addMs(nowMs, n, 1000)
	case PropertyDelayMS:
		dueMs = addMs(nowMs, n, 1)
	default:
		dueMs = n
	}
	if dueMs <= nowMs {
		return 0, nil
	}
	if dueMs-nowMs > r.MaxDelay.Milliseconds() {
		return 0, fmt.Errorf("property %s=%s puts delivery %v ahead, beyond the maximum delay %v: %w",
			name, v, time.Duration(dueMs-nowMs)*time.Millisecond, r.MaxDelay, record.ErrInvalid)
	}
	m.Properties = record.EditProperties(m.Properties, nil, PropertyOutMS, strconv.FormatInt(dueMs, 10),
		record.PropertyRealTopic, m.Topic, record.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.Topic = Topic
	m.QueueID = 0
	return dueMs, nil
}

// addMs is now + n*unit ms, saturating instead of overflowing.
func addMs(nowMs, n, unit int64) int64 {
	const limit = int64(1) << 52
	if n > limit/unit {
		return limit
	}
	if n < -limit/unit {
		return -limit
	}
	return nowMs + n*unit
}

// timerProperty is the first timer property of props in RocketMQ's order.
func timerProperty(props []byte) (name, value string, ok bool) {
	return record.FirstProperty(props, record.TimerRequestProperties[:]...)
}

// clearedOnDelivery are the properties Deliver removes.
var clearedOnDelivery = append(record.TimerRequestProperties[:],
	PropertyOutMS, record.PropertyRealTopic, record.PropertyRealQueueID)

// dueOf is the due time the properties of the timer record at phys carry
// in TIMER_OUT_MS.
func dueOf(phys int64, props []byte) (int64, error) {
	v, _ := record.GetProperty(props, PropertyOutMS)
	due, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("timer record at %d has %s %q, not a time", phys, PropertyOutMS, v)
	}
	return due, nil
}

// Deliver returns the message that delivers rec, a record of Topic, to its
// real topic and queue: body, flag, sysFlag, born time and host, store
// host, reconsume times and every property copied (UNIQ_KEY among them, so
// clients see the same message id) except the timer properties,
// TIMER_OUT_MS, REAL_TOPIC and REAL_QID, which are removed (RocketMQ's
// TimerMessageStore.convertMessage). The result aliases rec's body.
//
// A record whose REAL_TOPIC or REAL_QID is missing or malformed cannot be
// delivered: the error says which.
func Deliver(rec *record.Record) (*record.Message, error) {
	m, err := record.ToRealTarget(rec, clearedOnDelivery...)
	if err != nil {
		return nil, fmt.Errorf("timer %w", err)
	}
	return m, nil
}
