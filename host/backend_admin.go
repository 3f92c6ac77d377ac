package host

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/host/remoting"
)

// This file implements remoting.AdminBackend: the admin request codes'
// view of the store's metadata tables.

var _ remoting.AdminBackend = backend{}

// metaWritable refuses metadata changes on a slave: its tables are copies
// of its master's, replaced whole by the metadata sync, so a change made
// here would be lost at the next sync.
func (b backend) metaWritable(what string) error {
	if b.n.currentRole() == roleSlave {
		return fmt.Errorf("%s: %w: this node is a slave; change metadata on its master", what, remoting.ErrServiceUnavailable)
	}
	return nil
}

// TopicSnapshot implements remoting.AdminBackend.
func (b backend) TopicSnapshot() meta.TopicsSnapshot { return b.store().Meta().Topics.Snapshot() }

// PutTopic implements remoting.AdminBackend. meta.Topics.Put persists
// before it returns.
func (b backend) PutTopic(t meta.TopicConfig) error {
	what := "put topic " + t.TopicName
	if err := b.metaWritable(what); err != nil {
		return err
	}
	if err := b.store().Meta().Topics.Put(t); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	b.n.log.Info("topic configured", "topic", t.TopicName, "read_queues", t.ReadQueueNums,
		"write_queues", t.WriteQueueNums, "perm", t.Perm)
	return nil
}

// DeleteTopic implements remoting.AdminBackend.
func (b backend) DeleteTopic(name string) (bool, error) {
	what := "delete topic " + name
	if err := b.metaWritable(what); err != nil {
		return false, err
	}
	m := b.store().Meta()
	existed, err := m.Topics.Delete(name)
	if err != nil {
		return existed, fmt.Errorf("%s: %w", what, err)
	}
	if m.ConsumerOffsets.DeleteTopic(name) > 0 {
		if err := m.ConsumerOffsets.Persist(); err != nil {
			return existed, fmt.Errorf("%s: persisting consumer offsets: %w", what, err)
		}
	}
	if existed {
		b.n.log.Info("topic deleted", "topic", name)
	}
	return existed, nil
}

// SubscriptionGroupSnapshot implements remoting.AdminBackend.
func (b backend) SubscriptionGroupSnapshot() meta.SubscriptionGroupsSnapshot {
	return b.store().Meta().SubscriptionGroups.Snapshot()
}

// PutSubscriptionGroup implements remoting.AdminBackend.
func (b backend) PutSubscriptionGroup(c meta.SubscriptionGroupConfig) error {
	what := "put subscription group " + c.GroupName
	if err := b.metaWritable(what); err != nil {
		return err
	}
	g := b.store().Meta().SubscriptionGroups
	if err := g.Put(c); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := g.Persist(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	b.n.log.Info("subscription group configured", "group", c.GroupName)
	return nil
}

// DeleteSubscriptionGroup implements remoting.AdminBackend.
func (b backend) DeleteSubscriptionGroup(name string, cleanOffsets bool) (bool, error) {
	what := "delete subscription group " + name
	if err := b.metaWritable(what); err != nil {
		return false, err
	}
	m := b.store().Meta()
	existed := m.SubscriptionGroups.Delete(name)
	if err := m.SubscriptionGroups.Persist(); err != nil {
		return existed, fmt.Errorf("%s: %w", what, err)
	}
	if cleanOffsets && m.ConsumerOffsets.DeleteGroup(name) > 0 {
		if err := m.ConsumerOffsets.Persist(); err != nil {
			return existed, fmt.Errorf("%s: persisting consumer offsets: %w", what, err)
		}
	}
	if existed {
		b.n.log.Info("subscription group deleted", "group", name, "offsets_cleaned", cleanOffsets)
	}
	return existed, nil
}

// ConsumerOffsetSnapshot implements remoting.AdminBackend.
func (b backend) ConsumerOffsetSnapshot() meta.OffsetsSnapshot {
	return b.store().Meta().ConsumerOffsets.Snapshot()
}

// RuntimeInfo implements remoting.AdminBackend with the keys keel knows
// truly; RocketMQ's daily and per-second counters, thread-pool queues and
// version string are left out rather than faked.
func (b backend) RuntimeInfo() map[string]string {
	s := b.store()
	p := s.Positions()
	return map[string]string{
		"bootTimestamp":       strconv.FormatInt(b.n.started.UnixMilli(), 10),
		"commitLogMinOffset":  strconv.FormatInt(p.Min, 10),
		"commitLogMaxOffset":  strconv.FormatInt(p.Committed, 10),
		"commitLogDiskRatio":  strconv.FormatFloat(s.DiskUsedRatio(), 'f', -1, 64),
		"dispatchBehindBytes": strconv.FormatInt(p.Committed-p.Dispatched, 10),
	}
}

// queueLag is one queue of a group's consumer lag, for /status and
// /metrics.
type queueLag struct {
	Group          string `json:"group"`
	Topic          string `json:"topic"`
	Queue          int32  `json:"queue"`
	BrokerOffset   int64  `json:"broker_offset"`
	ConsumerOffset int64  `json:"consumer_offset"`
	// Lag is the messages the group has still to consume on the queue
	// (remoting.ConsumeQueueStats.Lag, the one definition).
	Lag int64 `json:"lag"`
}

// consumerLag is every group's lag on every queue of every topic it has
// committed offsets for, sorted by group, topic and queue (nil before the
// store opens). It is GET_CONSUME_STATS's computation (remoting's
// ConsumeProgress) without the last-consumed timestamps.
func (n *Node) consumerLag() []queueLag {
	if n.store == nil {
		return nil
	}
	be := backend{n}
	offs := be.ConsumerOffsetSnapshot()
	var out []queueLag
	for group, topics := range remoting.GroupTopics(offs) {
		for _, s := range remoting.ConsumeProgress(be, offs, group, topics, n.prof.Server.BrokerName) {
			out = append(out, queueLag{Group: group, Topic: s.Queue.Topic, Queue: s.Queue.QueueID,
				BrokerOffset: s.BrokerOffset, ConsumerOffset: s.ConsumerOffset, Lag: s.Lag()})
		}
	}
	slices.SortFunc(out, func(a, b queueLag) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Queue, b.Queue))
	})
	return out
}
