package schedule

import (
	"fmt"
	"strconv"

	"github.com/keelmq/keel/core/record"
)

// Topic is RocketMQ's schedule topic: a delayed message is stored there,
// in queue level-1, until it is due. Clients may not send to it.
const Topic = "SCHEDULE_TOPIC_XXXX"

// QueueID is the schedule topic's queue of level.
func QueueID(level int32) int32 { return level - 1 }

// levelOf is the level of schedule queue id q.
func levelOf(q int32) int32 { return q + 1 }

// Rewrite turns m into its schedule record when it carries a DELAY
// property above 0, as RocketMQ's broker does on every write path (send,
// batch, send-back), and returns the level it is stored under; it returns
// 0 and leaves m alone otherwise.
//
// The rewrite:
//   - clamps a level above l.Max() to l.Max() (and DELAY with it);
//   - sets REAL_TOPIC and REAL_QID to m's topic and queue;
//   - moves m to Topic, queue QueueID(level);
//   - removes TIMER_DELIVER_MS, TIMER_DELAY_SEC and TIMER_DELAY_MS: a
//     level wins over a timer (RocketMQ's HookUtils.checkIfTimerMessage).
//
// DELAY itself stays on the schedule record; Deliver removes it. A
// transaction half message (prepared) or rollback is left alone, as in
// RocketMQ, where only plain and committed messages are delayed.
//
// A DELAY that is not an integer is an error wrapping record.ErrInvalid
// (the broker answers MESSAGE_ILLEGAL); a DELAY of 0 or below means no
// delay, as in RocketMQ. m.Properties is replaced, never modified in
// place.
func (l Levels) Rewrite(m *record.Message) (level int32, err error) {
	v, ok := record.GetProperty(m.Properties, record.PropertyDelayLevel)
	if !ok {
		return 0, nil
	}
	switch record.TransactionType(m.SysFlag) {
	case record.SysFlagTransactionPrepared, record.SysFlagTransactionRollback:
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("property %s is %q, not a delay level (an integer): %w", record.PropertyDelayLevel, v, record.ErrInvalid)
	}
	if n <= 0 {
		return 0, nil
	}
	level = l.Clamp(int32(n))
	set := []string{record.PropertyRealTopic, m.Topic, record.PropertyRealQueueID, strconv.Itoa(int(m.QueueID))}
	if int64(level) != n {
		set = append(set, record.PropertyDelayLevel, strconv.Itoa(int(level)))
	}
	m.Properties = record.EditProperties(m.Properties, record.TimerRequestProperties[:], set...)
	m.Topic = Topic
	m.QueueID = QueueID(level)
	return level, nil
}

// clearedOnDelivery are the properties Deliver removes.
var clearedOnDelivery = append([]string{record.PropertyDelayLevel}, record.TimerRequestProperties[:]...)

// Deliver returns the message that delivers rec, a record of the schedule
// topic, to its real topic and queue (record.ToRealTarget): everything
// copied, UNIQ_KEY among them, so clients see the same message id, except
// DELAY and the timer properties, which are removed (so a delivered
// message is not delayed or timed again). REAL_TOPIC and REAL_QID stay, as
// in RocketMQ. The result aliases rec's body. A record whose REAL_TOPIC or
// REAL_QID is missing or malformed cannot be delivered: the error says
// which.
func Deliver(rec *record.Record) (*record.Message, error) {
	m, err := record.ToRealTarget(rec, clearedOnDelivery...)
	if err != nil {
		return nil, fmt.Errorf("schedule %w", err)
	}
	return m, nil
}
