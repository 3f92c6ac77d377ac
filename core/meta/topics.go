package meta

import (
	"fmt"
	"maps"

	"github.com/keelmq/keel/core/vfs"
)

// Topic permission bits, as in RocketMQ's PermName.
const (
	PermRead    int32 = 4 // the topic can be consumed
	PermWrite   int32 = 2 // the topic accepts messages
	PermInherit int32 = 1 // the permission is inherited from a template topic
)

// Topic filter types, as in RocketMQ's TopicFilterType.
const (
	FilterSingleTag = "SINGLE_TAG"
	FilterMultiTag  = "MULTI_TAG"
)

// TopicConfig describes one topic, with RocketMQ's TopicConfig JSON field
// names.
type TopicConfig struct {
	TopicName       string `json:"topicName"`       // see ValidateTopicName
	ReadQueueNums   int32  `json:"readQueueNums"`   // queues consumers read, 1..MaxQueueNums
	WriteQueueNums  int32  `json:"writeQueueNums"`  // queues producers write, 1..MaxQueueNums
	Perm            int32  `json:"perm"`            // OR of PermRead, PermWrite, PermInherit
	TopicFilterType string `json:"topicFilterType"` // FilterSingleTag or FilterMultiTag
	TopicSysFlag    int32  `json:"topicSysFlag"`    // RocketMQ's system flags, kept opaque
	Order           bool   `json:"order"`           // the topic is ordered (FIFO per queue)
}

// Readable reports whether Perm has PermRead.
func (c TopicConfig) Readable() bool { return c.Perm&PermRead != 0 }

// Writable reports whether Perm has PermWrite.
func (c TopicConfig) Writable() bool { return c.Perm&PermWrite != 0 }

// Validate returns nil if c is acceptable: a valid name, queue counts in
// 1..MaxQueueNums, Perm made only of the three permission bits, and a filter
// type that is empty, FilterSingleTag or FilterMultiTag. Errors wrap
// ErrInvalid.
func (c TopicConfig) Validate() error {
	if err := ValidateTopicName(c.TopicName); err != nil {
		return err
	}
	if c.ReadQueueNums < 1 || c.ReadQueueNums > MaxQueueNums {
		return fmt.Errorf("%w: topic %s: readQueueNums %d outside 1..%d", ErrInvalid, c.TopicName, c.ReadQueueNums, MaxQueueNums)
	}
	if c.WriteQueueNums < 1 || c.WriteQueueNums > MaxQueueNums {
		return fmt.Errorf("%w: topic %s: writeQueueNums %d outside 1..%d", ErrInvalid, c.TopicName, c.WriteQueueNums, MaxQueueNums)
	}
	if c.Perm&^(PermRead|PermWrite|PermInherit) != 0 {
		return fmt.Errorf("%w: topic %s: perm %d has bits other than read(4) write(2) inherit(1)", ErrInvalid, c.TopicName, c.Perm)
	}
	switch c.TopicFilterType {
	case "", FilterSingleTag, FilterMultiTag:
	default:
		return fmt.Errorf("%w: topic %s: unknown topicFilterType %q", ErrInvalid, c.TopicName, c.TopicFilterType)
	}
	return nil
}

func (c TopicConfig) name() string { return c.TopicName }

// TopicsSnapshot is a copy of the topic table, as stored in topics.json and
// as shipped by replication.
type TopicsSnapshot struct {
	DataVersion DataVersion            `json:"dataVersion"`      // the table's version
	Topics      map[string]TopicConfig `json:"topicConfigTable"` // name → config
}

func (s TopicsSnapshot) dataVersion() DataVersion { return s.DataVersion }

func (s TopicsSnapshot) validate() error { return validateConfigs("topic table", "topic", s.Topics) }

// Topics is the topic table. It is safe for concurrent use.
type Topics struct {
	table
	topics map[string]TopicConfig // guarded by mu
	// pending names the topics created or changed in memory whose
	// change is not yet on disk (guarded by mu): Get does not hand them
	// out before they are.
	pending map[string]bool
}

// OpenTopics loads the topic table from path (see Open for how a missing or
// corrupt file is handled). Later Persist calls write to path.
func OpenTopics(fsys vfs.FS, path string) (*Topics, error) {
	tp := &Topics{pending: map[string]bool{}}
	var s TopicsSnapshot
	if err := tp.open(fsys, path, &s); err != nil {
		return nil, err
	}
	tp.topics = orEmpty(s.Topics)
	return tp, nil
}

// Persist writes the table atomically if it changed since it was loaded or
// last persisted; otherwise it does nothing. On error the table stays dirty
// and a later Persist retries.
func (tp *Topics) Persist() error {
	var durable []string
	err := tp.persist(func() any {
		for n := range tp.pending {
			durable = append(durable, n)
		}
		return TopicsSnapshot{DataVersion: tp.version, Topics: tp.topics}
	})
	if err != nil || len(durable) == 0 {
		return err
	}
	tp.mu.Lock()
	for _, n := range durable {
		delete(tp.pending, n)
	}
	tp.mu.Unlock()
	return nil
}

// Get returns the topic called name. A topic whose creation or change is
// not yet on disk (another goroutine's Put or GetOrCreate is persisting
// it, or its persist failed) is returned only once it is: Get persists the
// table first, waiting for a persist in progress, and answers not found if
// that fails. So whoever acts on a topic Get returned (a SEND_OK for its
// first message) acts on a durable one.
func (tp *Topics) Get(name string) (TopicConfig, bool) {
	tp.mu.RLock()
	c, ok := tp.topics[name]
	pending := ok && tp.pending[name]
	tp.mu.RUnlock()
	if pending && tp.Persist() != nil {
		return TopicConfig{}, false
	}
	return c, ok
}

// Put creates or replaces the topic c.TopicName after validating c (an
// empty TopicFilterType becomes FilterSingleTag). The version advances
// unless c equals the stored config, and a change is persisted before Put
// returns (RocketMQ writes topics.json when a topic is created): a topic
// acknowledged to a client survives a crash. Errors wrap ErrInvalid, or
// are the persist error, in which case the change is kept in memory and a
// later Persist retries it.
func (tp *Topics) Put(c TopicConfig) error {
	if c.TopicFilterType == "" {
		c.TopicFilterType = FilterSingleTag
	}
	if err := c.Validate(); err != nil {
		return err
	}
	tp.mu.Lock()
	if setLocked(&tp.table, tp.topics, c.TopicName, c) {
		tp.pending[c.TopicName] = true
	}
	pending := tp.pending[c.TopicName]
	tp.mu.Unlock()
	if !pending {
		return nil
	}
	return tp.persistChange(c.TopicName)
}

// persistChange persists the table after a change to topic name.
func (tp *Topics) persistChange(name string) error {
	if err := tp.Persist(); err != nil {
		return fmt.Errorf("topic %s changed but not persisted: %w", name, err)
	}
	return nil
}

// GetOrCreate returns the topic called name, creating it first (readable,
// writable, defaultQueues read and write queues) if it does not exist, as
// RocketMQ's auto-create does, and persisting it before returning (see
// Put). created reports whether it was created. The error wraps ErrInvalid
// for a bad name or queue count, or is the persist error (the topic then
// exists in memory, created is true, and a later Persist retries).
func (tp *Topics) GetOrCreate(name string, defaultQueues int32) (c TopicConfig, created bool, err error) {
	if c, ok := tp.Get(name); ok {
		return c, false, nil
	}
	c = TopicConfig{
		TopicName: name, ReadQueueNums: defaultQueues, WriteQueueNums: defaultQueues,
		Perm: PermRead | PermWrite, TopicFilterType: FilterSingleTag,
	}
	if err := c.Validate(); err != nil {
		return TopicConfig{}, false, err
	}
	tp.mu.Lock()
	// created is false if another creator won the race; its topic too is
	// durable before it is used.
	if c, created = insertLocked(&tp.table, tp.topics, name, c); created {
		tp.pending[name] = true
	}
	pending := tp.pending[name]
	tp.mu.Unlock()
	if !pending {
		return c, created, nil
	}
	return c, created, tp.persistChange(name)
}

// Delete removes the topic called name, persists the table (see Put) and
// reports whether it existed. A persist error leaves the deletion in memory
// for a later Persist.
func (tp *Topics) Delete(name string) (bool, error) {
	tp.mu.Lock()
	existed := deleteLocked(&tp.table, tp.topics, name)
	tp.mu.Unlock()
	if !existed {
		return false, nil
	}
	return true, tp.persistChange(name)
}

// List returns every topic, sorted by name.
func (tp *Topics) List() []TopicConfig {
	tp.mu.RLock()
	defer tp.mu.RUnlock()
	return sortedValues(tp.topics)
}

// Snapshot returns a copy of the table and its version.
func (tp *Topics) Snapshot() TopicsSnapshot {
	tp.mu.RLock()
	defer tp.mu.RUnlock()
	return TopicsSnapshot{DataVersion: tp.version, Topics: maps.Clone(tp.topics)}
}

// Apply makes the table a copy of s if s.DataVersion differs from the
// table's version, and does nothing if they are equal (RocketMQ's
// version-gated replace). After a replacement, topics missing from s are
// gone and Version equals s.DataVersion, so applying the same snapshot again
// is a no-op. changed reports whether the table was replaced. A snapshot with
// an invalid topic is rejected whole with an error wrapping ErrInvalid.
func (tp *Topics) Apply(s TopicsSnapshot) (changed bool, err error) {
	return apply("topics", s, tp.applyValid)
}

func (tp *Topics) applyValid(s TopicsSnapshot) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if !replaceLocked(&tp.table, &tp.topics, s.Topics, s.DataVersion) {
		return false
	}
	clear(tp.pending) // the snapshot replaces every local change
	return true
}
