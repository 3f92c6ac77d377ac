package host

import (
	"fmt"
	"io"
	"maps"
	"slices"
)

// writeTopicAndLagMetrics writes the per-topic and per-group series,
// computed at scrape time from the consume queues and the offset table:
//
//	keel_topic_messages_total{topic}                    messages ever written to the topic (sum of its queues' max offsets)
//	keel_consumer_lag_messages{group,topic,queue}       messages the group has still to consume on the queue
//	keel_consumer_offset{group,topic,queue}             the group's committed offset
//	keel_metrics_series_dropped{family="group_queue"}   group × topic × queue series left out by maxGroupQueueSeries
//
// and the lag in bytes and last consume time (writeConsumeBytesAndTime),
// for the first maxGroupQueueSeries queues by group, topic and queue.
// Each family is written with its TYPE line, series sorted.
func writeTopicAndLagMetrics(w io.Writer, n *Node) {
	if n.store == nil {
		return
	}
	perTopic := map[string]int64{}
	n.store.Queues(func(topic string, _ int32, _, max int64) bool {
		perTopic[topic] += max
		return true
	})
	fmt.Fprintln(w, "# TYPE keel_topic_messages_total counter")
	for _, t := range slices.Sorted(maps.Keys(perTopic)) {
		fmt.Fprintf(w, "keel_topic_messages_total{topic=%q} %d\n", t, perTopic[t])
	}
	lag := n.consumerLag()
	dropped := max(0, len(lag)-maxGroupQueueSeries)
	lag = lag[:len(lag)-dropped]
	fmt.Fprintln(w, "# TYPE keel_metrics_series_dropped gauge")
	fmt.Fprintf(w, "keel_metrics_series_dropped{family=\"group_queue\"} %d\n", dropped)
	fmt.Fprintln(w, "# TYPE keel_consumer_lag_messages gauge")
	for _, l := range lag {
		fmt.Fprintf(w, "keel_consumer_lag_messages{group=%q,topic=%q,queue=\"%d\"} %d\n", l.Group, l.Topic, l.Queue, l.Lag)
	}
	fmt.Fprintln(w, "# TYPE keel_consumer_offset gauge")
	for _, l := range lag {
		fmt.Fprintf(w, "keel_consumer_offset{group=%q,topic=%q,queue=\"%d\"} %d\n", l.Group, l.Topic, l.Queue, l.ConsumerOffset)
	}
	writeConsumeBytesAndTime(w, n, lag)
}
