package meta

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/keelmq/keel/core/vfs"
)

// OffsetKey is the consumer offset table key of (topic, group): RocketMQ's
// "topic@group". Valid names cannot contain '@', so the key is unambiguous.
func OffsetKey(topic, group string) string { return topic + "@" + group }

// SplitOffsetKey splits an OffsetKey back into topic and group. ok is false
// if key has no '@'.
func SplitOffsetKey(key string) (topic, group string, ok bool) {
	return strings.Cut(key, "@")
}

// OffsetsSnapshot is a copy of the consumer offset table, as stored in
// consumerOffset.json and as shipped by replication: OffsetKey(topic, group)
// → queue id → next offset to consume (a consume-queue index, not a
// commitlog offset).
type OffsetsSnapshot struct {
	DataVersion DataVersion                `json:"dataVersion"`
	Offsets     map[string]map[int32]int64 `json:"offsetTable"`
}

func (s OffsetsSnapshot) dataVersion() DataVersion { return s.DataVersion }

func (s OffsetsSnapshot) validate() error {
	for key, queues := range s.Offsets {
		topic, group, ok := SplitOffsetKey(key)
		if !ok {
			return fmt.Errorf("%w: consumer offset key %q is not topic@group", ErrInvalid, key)
		}
		if err := validateOffsetArgs(group, topic, 0, 0); err != nil {
			return fmt.Errorf("consumer offset key %q: %w", key, err)
		}
		for q, off := range queues {
			if err := validateOffsetArgs(group, topic, q, off); err != nil {
				return fmt.Errorf("consumer offset key %q: %w", key, err)
			}
		}
	}
	return nil
}

func validateOffsetArgs(group, topic string, queueID int32, offset int64) error {
	if err := ValidateGroupName(group); err != nil {
		return err
	}
	if err := ValidateTopicName(topic); err != nil {
		return err
	}
	if queueID < 0 {
		return fmt.Errorf("%w: negative queue id %d", ErrInvalid, queueID)
	}
	if offset < 0 {
		return fmt.Errorf("%w: negative offset %d for queue %d", ErrInvalid, offset, queueID)
	}
	return nil
}

// ConsumerOffsets is the consumer offset table: for each (topic, group) the
// next offset each queue's consumer will read. It is safe for concurrent
// use.
type ConsumerOffsets struct {
	table
	offsets map[string]map[int32]int64 // guarded by mu
}

// OpenConsumerOffsets loads the table from path (see Open for how a missing
// or corrupt file is handled). Later Persist calls write to path.
func OpenConsumerOffsets(fsys vfs.FS, path string) (*ConsumerOffsets, error) {
	o := &ConsumerOffsets{offsets: map[string]map[int32]int64{}}
	var s OffsetsSnapshot
	if err := o.open(fsys, path, &s); err != nil {
		return nil, err
	}
	for k, q := range s.Offsets {
		if len(q) > 0 {
			o.offsets[k] = q
		}
	}
	return o, nil
}

// Persist writes the table atomically if it changed since it was loaded or
// last persisted; otherwise it does nothing. On error the table stays dirty.
func (o *ConsumerOffsets) Persist() error {
	return o.persist(func() any { return OffsetsSnapshot{DataVersion: o.version, Offsets: o.offsets} })
}

// Commit records that group's consumer of (topic, queueID) will next read
// offset. The new value replaces the old one even if it is lower: a consumer
// may rewind on purpose (reset by time, OFFSET_ILLEGAL correction). Only
// Apply, the replication path, refuses to lower offsets. The version
// advances unless the value is unchanged. Errors wrap ErrInvalid (bad names,
// negative queue id or offset).
func (o *ConsumerOffsets) Commit(group, topic string, queueID int32, offset int64) error {
	if err := validateOffsetArgs(group, topic, queueID, offset); err != nil {
		return fmt.Errorf("meta: commit offset: %w", err)
	}
	key := OffsetKey(topic, group)
	o.mu.Lock()
	defer o.mu.Unlock()
	queues := o.offsets[key]
	if queues == nil {
		queues = map[int32]int64{}
		o.offsets[key] = queues
	}
	setLocked(&o.table, queues, queueID, offset)
	return nil
}

// Query returns the offset group committed for (topic, queueID); ok is false
// if it never committed one.
func (o *ConsumerOffsets) Query(group, topic string, queueID int32) (offset int64, ok bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	offset, ok = o.offsets[OffsetKey(topic, group)][queueID]
	return offset, ok
}

// QueryAll returns a copy of group's offsets for every queue of topic, or
// nil if there are none.
func (o *ConsumerOffsets) QueryAll(group, topic string) map[int32]int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return maps.Clone(o.offsets[OffsetKey(topic, group)])
}

// Groups returns every group with at least one committed offset, sorted.
func (o *ConsumerOffsets) Groups() []string {
	return o.collect(func(topic, group string) (string, bool) { return group, true })
}

// TopicsOfGroup returns the topics group has offsets for, sorted.
func (o *ConsumerOffsets) TopicsOfGroup(group string) []string {
	return o.collect(func(t, g string) (string, bool) { return t, g == group })
}

// GroupsOfTopic returns the groups that have offsets for topic, sorted.
func (o *ConsumerOffsets) GroupsOfTopic(topic string) []string {
	return o.collect(func(t, g string) (string, bool) { return g, t == topic })
}

func (o *ConsumerOffsets) collect(pick func(topic, group string) (string, bool)) []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	set := map[string]struct{}{}
	for key := range o.offsets {
		topic, group, _ := SplitOffsetKey(key)
		if v, ok := pick(topic, group); ok {
			set[v] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// DeleteGroup removes every offset of group and returns how many topics it
// had offsets for.
func (o *ConsumerOffsets) DeleteGroup(group string) int {
	return o.deleteWhere(func(_, g string) bool { return g == group })
}

// DeleteTopic removes every group's offsets for topic and returns how many
// groups had some.
func (o *ConsumerOffsets) DeleteTopic(topic string) int {
	return o.deleteWhere(func(t, _ string) bool { return t == topic })
}

func (o *ConsumerOffsets) deleteWhere(match func(topic, group string) bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for key := range o.offsets {
		topic, group, _ := SplitOffsetKey(key)
		if match(topic, group) {
			delete(o.offsets, key)
			n++
		}
	}
	o.changedIfLocked(n > 0)
	return n
}

// Snapshot returns a deep copy of the table and its version.
func (o *ConsumerOffsets) Snapshot() OffsetsSnapshot {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(map[string]map[int32]int64, len(o.offsets))
	for k, q := range o.offsets {
		out[k] = maps.Clone(q)
	}
	return OffsetsSnapshot{DataVersion: o.version, Offsets: out}
}

// Apply merges s into the table by maximum: for every queue in s, the
// table's offset becomes max(local, s's), and queues only in the table keep
// their offsets. It never lowers an offset, whatever the versions say, so a
// master that returns with stale offsets cannot roll back what consumers
// committed on this broker meanwhile (apache/rocketmq#1094; RocketMQ itself
// overwrites with putAll). The consequences are deliberate: a rewind or a
// group deletion done on the source does not propagate through Apply.
//
// The version advances when at least one offset was raised or added, and
// changed reports that. A snapshot with a malformed key, bad names or
// negative values is rejected whole with an error wrapping ErrInvalid.
func (o *ConsumerOffsets) Apply(s OffsetsSnapshot) (changed bool, err error) {
	return apply("consumer offsets", s, o.applyValid)
}

func (o *ConsumerOffsets) applyValid(s OffsetsSnapshot) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	changed := false
	for key, remote := range s.Offsets {
		if len(remote) == 0 {
			continue
		}
		local := o.offsets[key]
		if local == nil {
			local = make(map[int32]int64, len(remote))
			o.offsets[key] = local
		}
		changed = mergeMax(local, remote) || changed
	}
	return o.changedIfLocked(changed)
}
