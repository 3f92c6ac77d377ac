package record

import (
	"fmt"
	"strconv"
)

// RealTarget returns the topic and queue a message parked under a system
// topic belongs to — a delayed message under the schedule topic, a timer
// message under the timer topic, a transaction's half message — from its
// REAL_TOPIC and REAL_QID properties. A missing or malformed one is an
// error naming it.
func RealTarget(props []byte) (topic string, queueID int32, err error) {
	topic, ok := GetProperty(props, PropertyRealTopic)
	if !ok || topic == "" {
		return "", 0, fmt.Errorf("no %s", PropertyRealTopic)
	}
	qs, _ := GetProperty(props, PropertyRealQueueID)
	q, err := strconv.ParseInt(qs, 10, 32)
	if err != nil || q < 0 {
		return "", 0, fmt.Errorf("%s %q is not a queue id", PropertyRealQueueID, qs)
	}
	return topic, int32(q), nil
}

// ToRealTarget returns the message that puts rec, a parked record, back to
// its real topic and queue (RealTarget): rec.Message() with every property
// kept (UNIQ_KEY among them, so clients see one message id) except those
// named in remove. The result aliases rec's body; rec's properties are not
// modified. The error says what RealTarget lacked, with rec's offset.
func ToRealTarget(rec *Record, remove ...string) (*Message, error) {
	topic, q, err := RealTarget(rec.Properties)
	if err != nil {
		return nil, fmt.Errorf("record at %d: %w", rec.PhysOffset, err)
	}
	m := rec.Message()
	m.Properties = EditProperties(m.Properties, remove)
	m.Topic, m.QueueID = topic, q
	return m, nil
}
