package remoting

import (
	"slices"

	"github.com/keelmq/keel/core/meta"
)

// GroupList is QUERY_TOPIC_CONSUME_BY_WHO's body (RocketMQ's GroupList),
// standard JSON.
type GroupList struct {
	GroupList []string `json:"groupList"`
}

// handleQueryTopicConsumeByWho is QUERY_TOPIC_CONSUME_BY_WHO (300): header
// topic (required); the groups whose live members subscribe to the topic
// and the groups with committed offsets on it, as RocketMQ's
// AdminBrokerProcessor answers, sorted. A topic nobody consumes (or that
// does not exist) has an empty list.
func (b *Broker) handleQueryTopicConsumeByWho(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	topic := e.required("topic")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding QUERY_TOPIC_CONSUME_BY_WHO header: "+e.err.Error())
	}
	groups := b.reg.groupsSubscribing(topic)
	for key := range b.be.ConsumerOffsetSnapshot().Offsets {
		if t, g, ok := meta.SplitOffsetKey(key); ok && t == topic && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	if groups == nil {
		groups = []string{}
	}
	return jsonResponse(req, GroupList{groups})
}

// groupsSubscribing returns the groups with a live member subscribed to
// topic, in no particular order.
func (r *registry) groupsSubscribing(topic string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, g := range r.groups {
		for _, m := range g {
			if _, ok := m.subs[topic]; ok {
				out = append(out, name)
				break
			}
		}
	}
	return out
}
