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

// handleCleanUnsupported answers CLEAN_EXPIRED_CONSUMEQUEUE (306) and
// CLEAN_UNUSED_TOPIC (316) with REQUEST_CODE_NOT_SUPPORTED and why:
// keel's retention already trims every consume queue to the log's oldest
// record, and removing a deleted topic's consume queues while the
// dispatcher may write to them needs the store's own coordination, which
// it does not offer yet. Nothing changes.
func (b *Broker) handleCleanUnsupported(req *Request) *Command {
	remark := "CLEAN_UNUSED_TOPIC is not supported by keel: a deleted topic's consume queues stay until retention removes their messages"
	if req.Cmd.Code == CodeCleanExpiredConsumeQueue {
		remark = "CLEAN_EXPIRED_CONSUMEQUEUE is not supported by keel: retention trims every consume queue to the log's oldest record by itself"
	}
	return NewResponse(req.Cmd, RequestCodeNotSupported, remark)
}
