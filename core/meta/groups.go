package meta

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/keelmq/keel/core/vfs"
)

// DefaultRetryMaxTimes is how many times a message is redelivered to a
// group before it goes to the dead-letter queue, unless the group says
// otherwise (RocketMQ's default).
const DefaultRetryMaxTimes = 16

// SubscriptionGroupConfig describes one consumer group: the part of
// RocketMQ's SubscriptionGroupConfig a broker acts on, with its JSON field
// names. Fields missing from decoded JSON take DefaultSubscriptionGroup's
// values.
type SubscriptionGroupConfig struct {
	// GroupName is the group's name; see ValidateGroupName.
	GroupName string `json:"groupName"`
	// ConsumeEnable: the group may pull. Default true.
	ConsumeEnable bool `json:"consumeEnable"`
	// ConsumeFromMinEnable: a new consumer starts from the queue's minimum
	// offset rather than its maximum. Default false.
	ConsumeFromMinEnable bool `json:"consumeFromMinEnable"`
	// ConsumeBroadcastEnable: the group may consume in broadcast mode.
	// Default true.
	ConsumeBroadcastEnable bool `json:"consumeBroadcastEnable"`
	// RetryQueueNums is the queue count of the group's %RETRY% topic.
	// Default 1, must be >= 0.
	RetryQueueNums int32 `json:"retryQueueNums"`
	// RetryMaxTimes is the redelivery limit. Default DefaultRetryMaxTimes,
	// must be >= 0.
	RetryMaxTimes int32 `json:"retryMaxTimes"`
	// BrokerID is the broker the group normally pulls from (0 = master).
	BrokerID int64 `json:"brokerId"`
	// WhichBrokerWhenConsumeSlowly is the broker a slow consumer is sent to.
	// Default 1 (the first slave).
	WhichBrokerWhenConsumeSlowly int64 `json:"whichBrokerWhenConsumeSlowly"`
	// NotifyConsumerIDsChangedEnable: tell the group's consumers when its
	// membership changes so they rebalance. Default true.
	NotifyConsumerIDsChangedEnable bool `json:"notifyConsumerIdsChangedEnable"`
}

// DefaultSubscriptionGroup returns the config RocketMQ gives a group it
// creates automatically.
func DefaultSubscriptionGroup(name string) SubscriptionGroupConfig {
	return SubscriptionGroupConfig{
		GroupName:                      name,
		ConsumeEnable:                  true,
		ConsumeBroadcastEnable:         true,
		RetryQueueNums:                 1,
		RetryMaxTimes:                  DefaultRetryMaxTimes,
		WhichBrokerWhenConsumeSlowly:   1,
		NotifyConsumerIDsChangedEnable: true,
	}
}

// UnmarshalJSON decodes a group, starting from DefaultSubscriptionGroup so
// that fields absent from data keep their defaults rather than zero.
func (c *SubscriptionGroupConfig) UnmarshalJSON(data []byte) error {
	type plain SubscriptionGroupConfig // no methods: avoids recursion
	p := plain(DefaultSubscriptionGroup(""))
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*c = SubscriptionGroupConfig(p)
	return nil
}

// Validate returns nil if c has a valid group name and non-negative counts
// and broker ids; errors wrap ErrInvalid.
func (c SubscriptionGroupConfig) Validate() error {
	if err := ValidateGroupName(c.GroupName); err != nil {
		return err
	}
	if c.RetryQueueNums < 0 || c.RetryQueueNums > MaxQueueNums {
		return fmt.Errorf("%w: group %s: retryQueueNums %d outside 0..%d", ErrInvalid, c.GroupName, c.RetryQueueNums, MaxQueueNums)
	}
	if c.RetryMaxTimes < 0 {
		return fmt.Errorf("%w: group %s: negative retryMaxTimes %d", ErrInvalid, c.GroupName, c.RetryMaxTimes)
	}
	if c.BrokerID < 0 || c.WhichBrokerWhenConsumeSlowly < 0 {
		return fmt.Errorf("%w: group %s: negative broker id", ErrInvalid, c.GroupName)
	}
	return nil
}

func (c SubscriptionGroupConfig) name() string { return c.GroupName }

// SubscriptionGroupsSnapshot is a copy of the subscription group table, as
// stored in subscriptionGroup.json and as shipped by replication.
type SubscriptionGroupsSnapshot struct {
	DataVersion DataVersion                        `json:"dataVersion"`            // the table's version
	Groups      map[string]SubscriptionGroupConfig `json:"subscriptionGroupTable"` // name → config
}

func (s SubscriptionGroupsSnapshot) dataVersion() DataVersion { return s.DataVersion }

func (s SubscriptionGroupsSnapshot) validate() error {
	return validateConfigs("subscription group table", "group", s.Groups)
}

// SubscriptionGroups is the subscription group table. It is safe for
// concurrent use.
type SubscriptionGroups struct {
	table
	groups map[string]SubscriptionGroupConfig // guarded by mu
}

// OpenSubscriptionGroups loads the table from path (see Open for how a
// missing or corrupt file is handled). Later Persist calls write to path.
func OpenSubscriptionGroups(fsys vfs.FS, path string) (*SubscriptionGroups, error) {
	g := &SubscriptionGroups{}
	var s SubscriptionGroupsSnapshot
	if err := g.open(fsys, path, &s); err != nil {
		return nil, err
	}
	g.groups = orEmpty(s.Groups)
	return g, nil
}

// Persist writes the table atomically if it changed since it was loaded or
// last persisted; otherwise it does nothing. On error the table stays dirty.
func (g *SubscriptionGroups) Persist() error {
	return g.persist(func() any { return SubscriptionGroupsSnapshot{DataVersion: g.version, Groups: g.groups} })
}

// Get returns the group called name.
func (g *SubscriptionGroups) Get(name string) (SubscriptionGroupConfig, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	c, ok := g.groups[name]
	return c, ok
}

// Put creates or replaces the group c.GroupName after validating c. The
// version advances unless c equals the stored config. Errors wrap
// ErrInvalid.
func (g *SubscriptionGroups) Put(c SubscriptionGroupConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	setLocked(&g.table, g.groups, c.GroupName, c)
	return nil
}

// GetOrCreate returns the group called name, creating it with
// DefaultSubscriptionGroup's settings if it does not exist (RocketMQ's
// autoCreateSubscriptionGroup). created reports whether it was created.
func (g *SubscriptionGroups) GetOrCreate(name string) (c SubscriptionGroupConfig, created bool, err error) {
	if c, ok := g.Get(name); ok {
		return c, false, nil
	}
	c = DefaultSubscriptionGroup(name)
	if err := c.Validate(); err != nil {
		return SubscriptionGroupConfig{}, false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c, created = insertLocked(&g.table, g.groups, name, c)
	return c, created, nil
}

// Delete removes the group called name and reports whether it existed. It
// does not touch the group's consumer offsets (see ConsumerOffsets.DeleteGroup).
func (g *SubscriptionGroups) Delete(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return deleteLocked(&g.table, g.groups, name)
}

// List returns every group, sorted by name.
func (g *SubscriptionGroups) List() []SubscriptionGroupConfig {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return sortedValues(g.groups)
}

// Snapshot returns a copy of the table and its version.
func (g *SubscriptionGroups) Snapshot() SubscriptionGroupsSnapshot {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return SubscriptionGroupsSnapshot{DataVersion: g.version, Groups: maps.Clone(g.groups)}
}

// Apply makes the table a copy of s if s.DataVersion differs from the
// table's version and does nothing if they are equal, exactly as
// Topics.Apply. changed reports whether the table was replaced. A snapshot
// with an invalid group is rejected whole with an error wrapping ErrInvalid.
func (g *SubscriptionGroups) Apply(s SubscriptionGroupsSnapshot) (changed bool, err error) {
	return apply("subscription groups", s, g.applyValid)
}

func (g *SubscriptionGroups) applyValid(s SubscriptionGroupsSnapshot) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return replaceLocked(&g.table, &g.groups, s.Groups, s.DataVersion)
}
