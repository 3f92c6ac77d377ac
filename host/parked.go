package host

import (
	"fmt"

	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/host/schedule"
	"github.com/keelmq/keel/host/timer"
	"github.com/keelmq/keel/host/txn"
)

// parkedTopics are the system topics a delayed, timer or transactional
// message is parked in until it is due or committed, by what they park.
// Their records go to the index plugin without keys: the record
// applications look up is the one delivered to the real topic, which
// carries the same UNIQ_KEY and KEYS and is indexed then. RocketMQ
// indexes the parked copy too, under the system topic; only a query that
// names the system topic could find it, and it doubled the index entries
// of every such message (bench/semantics' BenchmarkSendPath with 1 M
// timers: about 2.17 M key puts before, 174 k after, the deliveries'). A query by key on one of
// these topics is refused (unindexedQuery).
var parkedTopics = map[string]string{
	schedule.Topic: "delayed messages (delay levels)",
	timer.Topic:    "timer messages",
	txn.HalfTopic:  "transactional half messages",
}

// unindexed reports whether records of topic reach the index without
// keys (storehost.Listener.Unindexed).
func unindexed(topic string) bool {
	_, ok := parkedTopics[topic]
	return ok
}

// unindexedQuery is the error for a query by key on a parked topic, nil
// for any other topic.
func unindexedQuery(topic string) error {
	what, ok := parkedTopics[topic]
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: keel does not index %s, where %s wait: query the real topic, where each is indexed once delivered",
		remoting.ErrNotSupported, topic, what)
}
