package remoting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// RocketMQ's admin bodies are written by fastjson without features
// (RemotingSerializable.toJson): object fields in alphabetical order, a
// Map<MessageQueue,X> key written as the MessageQueue object itself and a
// Map<Integer,X> key written as a bare number. Neither is valid JSON, but
// Java mqadmin and the RocketMQ dashboard expect exactly that form, so the
// bodies of GET_TOPIC_STATS_INFO, GET_CONSUME_STATS and
// GET_ALL_CONSUMER_OFFSET are written by hand here, and read back by
// DecodeTopicStats and DecodeConsumeStats (keel admin uses them).

// MessageQueue names one queue, as RocketMQ's MessageQueue does.
type MessageQueue struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

// TopicQueueStats is one queue of GET_TOPIC_STATS_INFO's TopicStatsTable.
type TopicQueueStats struct {
	Queue MessageQueue
	// LastUpdateTimestamp is the store time of the queue's last message
	// (offset MaxOffset-1), Unix milliseconds; 0 for an empty queue.
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
	MaxOffset           int64 `json:"maxOffset"`
	MinOffset           int64 `json:"minOffset"`
}

// ConsumeQueueStats is one queue of GET_CONSUME_STATS's ConsumeStats.
type ConsumeQueueStats struct {
	Queue MessageQueue
	// BrokerOffset is the queue's max offset: the next message to be
	// written.
	BrokerOffset int64 `json:"brokerOffset"`
	// ConsumerOffset is the group's committed offset, 0 when it has none.
	ConsumerOffset int64 `json:"consumerOffset"`
	// LastTimestamp is the store time of the last message the group
	// consumed (offset ConsumerOffset-1), Unix milliseconds; 0 when none.
	LastTimestamp int64 `json:"lastTimestamp"`
}

// Lag is the number of messages the group has still to consume on the
// queue: BrokerOffset-ConsumerOffset, never negative. It is the one
// definition of consumer lag (GET_CONSUME_STATS, /status, /metrics and
// keel admin all use it).
func (s ConsumeQueueStats) Lag() int64 { return max(0, s.BrokerOffset-s.ConsumerOffset) }

// appendMessageQueueKey appends q as fastjson writes a MessageQueue map
// key: its fields in alphabetical order.
func appendMessageQueueKey(dst []byte, q MessageQueue) []byte {
	dst = append(dst, `{"brokerName":`...)
	dst = appendJSONString(dst, q.BrokerName)
	dst = append(dst, `,"queueId":`...)
	dst = strconv.AppendInt(dst, int64(q.QueueID), 10)
	dst = append(dst, `,"topic":`...)
	dst = appendJSONString(dst, q.Topic)
	return append(dst, '}')
}

// appendIntFields appends a JSON object of int64 fields, in the order
// given (callers give them alphabetically).
func appendIntFields(dst []byte, kv ...any) []byte {
	dst = append(dst, '{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, kv[i].(string))
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, kv[i+1].(int64), 10)
	}
	return append(dst, '}')
}

// sortQueues orders queues as fastjson's HashMap would not: by topic, then
// queue id, so the bodies are deterministic (Java accepts any order).
func sortQueues[S any](s []S, q func(S) MessageQueue) {
	slices.SortFunc(s, func(a, b S) int {
		qa, qb := q(a), q(b)
		if qa.Topic != qb.Topic {
			if qa.Topic < qb.Topic {
				return -1
			}
			return 1
		}
		return int(qa.QueueID) - int(qb.QueueID)
	})
}

// encodeQueueTable writes {"offsetTable":{<MessageQueue>:<value>,...}}
// for stats sorted by queue, each value written by value.
func encodeQueueTable[S any](stats []S, queue func(S) MessageQueue, value func([]byte, S) []byte) []byte {
	sortQueues(stats, queue)
	dst := []byte(`{"offsetTable":{`)
	for i, s := range stats {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendMessageQueueKey(dst, queue(s))
		dst = append(dst, ':')
		dst = value(dst, s)
	}
	return append(dst, "}}"...)
}

// encodeTopicStats writes a TopicStatsTable body.
func encodeTopicStats(stats []TopicQueueStats) []byte {
	return encodeQueueTable(stats, func(s TopicQueueStats) MessageQueue { return s.Queue }, func(dst []byte, s TopicQueueStats) []byte {
		return appendIntFields(dst, "lastUpdateTimestamp", s.LastUpdateTimestamp, "maxOffset", s.MaxOffset, "minOffset", s.MinOffset)
	})
}

// encodeConsumeStats writes a ConsumeStats body. consumeTps is left out:
// keel does not measure it (Java reads a missing field as 0).
func encodeConsumeStats(stats []ConsumeQueueStats) []byte {
	return encodeQueueTable(stats, func(s ConsumeQueueStats) MessageQueue { return s.Queue }, func(dst []byte, s ConsumeQueueStats) []byte {
		return appendIntFields(dst, "brokerOffset", s.BrokerOffset, "consumerOffset", s.ConsumerOffset, "lastTimestamp", s.LastTimestamp)
	})
}

// DecodeTopicStats reads a GET_TOPIC_STATS_INFO body (fastjson's
// object-keyed form, or the same table with its keys as JSON strings).
func DecodeTopicStats(body []byte) ([]TopicQueueStats, error) {
	return decodeQueueTableOf(body, func(q MessageQueue) TopicQueueStats { return TopicQueueStats{Queue: q} })
}

// DecodeConsumeStats reads a GET_CONSUME_STATS body (see
// DecodeTopicStats).
func DecodeConsumeStats(body []byte) ([]ConsumeQueueStats, error) {
	return decodeQueueTableOf(body, func(q MessageQueue) ConsumeQueueStats { return ConsumeQueueStats{Queue: q} })
}

// decodeQueueTableOf decodes each value of body's offsetTable into the S
// that mk makes for its queue.
func decodeQueueTableOf[S any](body []byte, mk func(MessageQueue) S) ([]S, error) {
	var out []S
	err := decodeQueueTable(body, func(q MessageQueue, v []byte) error {
		s := mk(q)
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// decodeQueueTable calls each for every entry of body's offsetTable, a map
// whose keys are MessageQueue objects (or JSON strings holding one).
func decodeQueueTable(body []byte, each func(MessageQueue, []byte) error) error {
	i := bytes.Index(body, []byte(`"offsetTable"`))
	if i < 0 {
		return fmt.Errorf("decoding queue table: no offsetTable in %q", truncate(body))
	}
	p := skipSpace(body, i+len(`"offsetTable"`))
	if p >= len(body) || body[p] != ':' {
		return fmt.Errorf("decoding queue table: offsetTable is not followed by ':'")
	}
	p = skipSpace(body, p+1)
	if p >= len(body) || body[p] != '{' {
		return fmt.Errorf("decoding queue table: offsetTable is not an object")
	}
	p = skipSpace(body, p+1)
	for p < len(body) && body[p] != '}' {
		key, next, err := jsonValue(body, p)
		if err != nil {
			return fmt.Errorf("decoding queue table key: %w", err)
		}
		if len(key) == 0 {
			return fmt.Errorf("decoding queue table: empty key at byte %d", p)
		}
		if key[0] == '"' { // a key written as a JSON string holding the object
			var s string
			if err := json.Unmarshal(key, &s); err != nil {
				return fmt.Errorf("decoding queue table key: %w", err)
			}
			key = []byte(s)
		}
		var q MessageQueue
		if err := json.Unmarshal(key, &q); err != nil {
			return fmt.Errorf("decoding queue table key %s: %w", key, err)
		}
		p = skipSpace(body, next)
		if p >= len(body) || body[p] != ':' {
			return fmt.Errorf("decoding queue table: key %s is not followed by ':'", key)
		}
		val, next, err := jsonValue(body, skipSpace(body, p+1))
		if err != nil {
			return fmt.Errorf("decoding queue table value of %s: %w", key, err)
		}
		if err := each(q, val); err != nil {
			return fmt.Errorf("decoding queue table value of %s: %w", key, err)
		}
		p = skipSpace(body, next)
		if p < len(body) && body[p] == ',' {
			p = skipSpace(body, p+1)
		}
	}
	if p >= len(body) {
		return fmt.Errorf("decoding queue table: offsetTable is not closed")
	}
	return nil
}

// jsonValue returns the object, string or scalar starting at body[p] and
// the index after it. Objects and arrays are matched by depth, skipping
// strings; their content is not checked here.
func jsonValue(body []byte, p int) (v []byte, next int, err error) {
	if p >= len(body) {
		return nil, p, fmt.Errorf("unexpected end of body")
	}
	depth, inStr := 0, false
	for i := p; i < len(body); i++ {
		c := body[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
				if depth == 0 {
					return body[p : i+1], i + 1, nil
				}
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return body[p : i+1], i + 1, nil
			}
			if depth < 0 {
				return body[p:i], i, nil
			}
		case depth == 0 && (c == ',' || c == ':'):
			return body[p:i], i, nil
		}
	}
	return nil, len(body), fmt.Errorf("unexpected end of body")
}

func skipSpace(b []byte, p int) int {
	for p < len(b) && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r') {
		p++
	}
	return p
}

// truncate shortens b for an error message.
func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// encodeConsumerOffsets writes GET_ALL_CONSUMER_OFFSET's body:
// {"dataVersion":{...},"offsetTable":{"topic@group":{0:5,...},...}} with
// bare queue-id keys, as fastjson writes a Map<Integer,Long>.
func encodeConsumerOffsets(offsets map[string]map[int32]int64, version []byte) []byte {
	dst := []byte(`{"dataVersion":`)
	dst = append(dst, version...)
	dst = append(dst, `,"offsetTable":{`...)
	keys := slices.Sorted(maps.Keys(offsets))
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ":{"...)
		qs := offsets[k]
		ids := slices.Sorted(maps.Keys(qs))
		for j, q := range ids {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(q), 10)
			dst = append(dst, ':')
			dst = strconv.AppendInt(dst, qs[q], 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, "}}"...)
}
