package txn

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/keelmq/keel/core/record"
)

// opRecord is the op record that marks the half message at half queue
// offset half.QueueOffset decided (RocketMQ's deletePrepareMessage):
// topic OpTopic, queue 0, TAGS "d", body the offset followed by ",", born
// at nowMs with the half record's hosts.
func opRecord(half *record.Record, nowMs int64) *record.Message {
	return &record.Message{
		Topic:         OpTopic,
		QueueID:       queueID,
		Body:          []byte(strconv.FormatInt(half.QueueOffset, 10) + ","),
		Properties:    record.SetProperty(nil, record.PropertyTags, OpTag),
		BornTimestamp: nowMs,
		BornHost:      half.BornHost,
		StoreHost:     half.StoreHost,
	}
}

// parseOpBody returns the half queue offsets an op record's body names:
// decimal offsets, each followed by "," (RocketMQ 5 batches several into
// one body). An entry that is not a non-negative integer is an error.
func parseOpBody(body []byte) ([]int64, error) {
	var out []int64
	for _, part := range bytes.Split(body, []byte{','}) {
		part = bytes.TrimSpace(part)
		if len(part) == 0 {
			continue
		}
		n, err := strconv.ParseInt(string(part), 10, 64)
		if err != nil || n < 0 {
			return out, fmt.Errorf("op record body entry %q is not a half queue offset", part)
		}
		out = append(out, n)
	}
	return out, nil
}
