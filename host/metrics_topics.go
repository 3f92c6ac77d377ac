package host

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/keelmq/keel/core/record"
)

// maxTopicSeries caps the topics with their own keel_topic_*_in_total
// series: sends to further topics are counted under topic="__other__", so
// a client creating topics without end cannot grow /metrics without end.
// (Counters of a deleted topic stay until the node restarts.)
const maxTopicSeries = 1000

// otherLabel is the label value of the series that collect what a cap
// leaves out.
const otherLabel = "__other__"

// topicIn is one topic's send counters.
type topicIn struct {
	msgs, bytes atomic.Uint64
}

// topicCounters counts messages and bytes stored per topic, as the client
// named it (before a delay, timer or transaction rewrite sends the record
// to a system topic). Safe for concurrent use; the hot path takes a read
// lock and two atomic adds.
type topicCounters struct {
	mu     sync.RWMutex
	topics map[string]*topicIn
}

func newTopicCounters() *topicCounters {
	return &topicCounters{topics: map[string]*topicIn{}}
}

// add counts msgs messages of bytes bytes stored for topic.
func (c *topicCounters) add(topic string, msgs, bytes int) {
	c.mu.RLock()
	t := c.topics[topic]
	c.mu.RUnlock()
	if t == nil {
		c.mu.Lock()
		if t = c.topics[topic]; t == nil {
			if len(c.topics) >= maxTopicSeries {
				topic = otherLabel
			}
			if t = c.topics[topic]; t == nil {
				t = &topicIn{}
				c.topics[topic] = t
			}
		}
		c.mu.Unlock()
	}
	t.msgs.Add(uint64(msgs))
	t.bytes.Add(uint64(bytes))
}

// firstTopic is the topic of a send's messages (Backend.Append's msgs all
// have one), "" for none.
func firstTopic(msgs []*record.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[0].Topic
}

// write writes keel_topic_messages_in_total{topic} and
// keel_topic_bytes_in_total{topic}, each family with its TYPE line,
// topics sorted.
func (c *topicCounters) write(w io.Writer) {
	c.mu.RLock()
	names := slices.Sorted(maps.Keys(c.topics))
	vals := make([]*topicIn, len(names))
	for i, n := range names {
		vals[i] = c.topics[n]
	}
	c.mu.RUnlock()
	fmt.Fprintln(w, "# TYPE keel_topic_messages_in_total counter")
	for i, n := range names {
		fmt.Fprintf(w, "keel_topic_messages_in_total{topic=%q} %d\n", n, vals[i].msgs.Load())
	}
	fmt.Fprintln(w, "# TYPE keel_topic_bytes_in_total counter")
	for i, n := range names {
		fmt.Fprintf(w, "keel_topic_bytes_in_total{topic=%q} %d\n", n, vals[i].bytes.Load())
	}
}
