package host

import (
	"fmt"
	"io"
	"strconv"

	"github.com/keelmq/keel/core/record"
)

// maxGroupQueueSeries caps the group × topic × queue series of each
// per-group family on /metrics (the first ones by group, topic and queue
// are written); keel_metrics_series_dropped{family="group_queue"} says
// how many were left out. Each series of keel_consumer_lag_bytes and
// keel_consumer_last_consume_timestamp_seconds costs up to three record
// reads per scrape, which the cap bounds too.
const maxGroupQueueSeries = 2000

// queueRecord is what a scrape needs of one stored message.
type queueRecord struct {
	phys, end, storeMillis int64
	ok                     bool
}

// recordAt returns the message at queue offset off of topic/q: its
// physical start and end and its store time; ok is false when there is no
// such message (off < 0, beyond the visible end, gone by retention) or it
// cannot be read.
func (n *Node) recordAt(topic string, q int32, off int64) queueRecord {
	if off < 0 {
		return queueRecord{}
	}
	r, err := n.store.GetMessages(topic, q, off, 1, 0, nil)
	if err != nil || len(r.Sizes) == 0 {
		return queueRecord{}
	}
	_, info, err := record.Check(r.Data[:r.Sizes[0]], false)
	if err != nil || info.QueueOffset != off {
		return queueRecord{}
	}
	return queueRecord{phys: info.PhysOffset, end: info.PhysOffset + int64(info.Size), storeMillis: info.StoreTimestamp, ok: true}
}

// writeConsumeBytesAndTime writes, for each queue of lag:
//
//	keel_consumer_lag_bytes{group,topic,queue}                      commitlog bytes from the group's next message on the queue to the end of the queue's last message
//	keel_consumer_last_consume_timestamp_seconds{group,topic,queue} store time of the last message the group consumed there (offset consumer_offset-1), 0 when none
//
// Lag in bytes is the commitlog span, so it counts the records of other
// queues stored in between: an upper bound of the queue's own unconsumed
// bytes, exact for a log with one queue, 0 when the group is caught up.
// When the next message is gone by retention the span starts at the
// queue's oldest readable one. The last consume time is RocketMQ's
// ConsumeStats lastTimestamp (what its dashboard shows as the last
// consume time), in Unix seconds.
func writeConsumeBytesAndTime(w io.Writer, n *Node, lag []queueLag) {
	type qk struct {
		topic string
		q     int32
	}
	last := map[qk]queueRecord{} // the queue's last message, read once per scrape
	fmt.Fprintln(w, "# TYPE keel_consumer_lag_bytes gauge")
	for _, l := range lag {
		var bytes int64
		if l.ConsumerOffset < l.BrokerOffset {
			k := qk{l.Topic, l.Queue}
			end, seen := last[k]
			if !seen {
				end = n.recordAt(l.Topic, l.Queue, l.BrokerOffset-1)
				last[k] = end
			}
			from := l.ConsumerOffset
			if lo := n.store.MinQueueOffset(l.Topic, l.Queue); from < lo {
				from = lo
			}
			if next := n.recordAt(l.Topic, l.Queue, from); next.ok && end.ok {
				bytes = max(0, end.end-next.phys)
			}
		}
		fmt.Fprintf(w, "keel_consumer_lag_bytes{group=%q,topic=%q,queue=\"%d\"} %d\n", l.Group, l.Topic, l.Queue, bytes)
	}
	fmt.Fprintln(w, "# TYPE keel_consumer_last_consume_timestamp_seconds gauge")
	for _, l := range lag {
		var secs float64
		if r := n.recordAt(l.Topic, l.Queue, l.ConsumerOffset-1); r.ok {
			secs = float64(r.storeMillis) / 1000
		}
		fmt.Fprintf(w, "keel_consumer_last_consume_timestamp_seconds{group=%q,topic=%q,queue=\"%d\"} %s\n", l.Group, l.Topic, l.Queue, strconv.FormatFloat(secs, 'f', -1, 64))
	}
}
