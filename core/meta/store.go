package meta

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/keelmq/keel/core/vfs"
)

// File names of the four tables inside a Store's directory (RocketMQ's).
const (
	TopicsFile             = "topics.json"
	SubscriptionGroupsFile = "subscriptionGroup.json"
	ConsumerOffsetsFile    = "consumerOffset.json"
	DelayOffsetsFile       = "delayOffset.json"
)

// Store groups a broker's four metadata tables, each in its own file under
// one directory. The tables are independent: each is safe for concurrent
// use and persists on its own.
type Store struct {
	dir string

	Topics             *Topics             // topics.json
	SubscriptionGroups *SubscriptionGroups // subscriptionGroup.json
	ConsumerOffsets    *ConsumerOffsets    // consumerOffset.json
	DelayOffsets       *DelayOffsets       // delayOffset.json
}

// Open creates dir if needed and loads the four tables from it.
//
// For each table file:
//   - missing: the table starts empty with a fresh version (this is also the
//     state after a crash during the very first write of the table);
//   - present and valid: it is loaded as is. A leftover temp file
//     (name+TempSuffix) from an interrupted write is ignored: the main file
//     holds the last committed state;
//   - present but not valid JSON, or breaking a table rule: Open fails with
//     an error naming the file. It never starts such a table empty, because
//     that would silently forget topics or roll consumers back to 0.
func Open(fsys vfs.FS, dir string) (*Store, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("meta: create directory %s: %w", dir, err)
	}
	s := &Store{dir: dir}
	var err error
	if s.Topics, err = OpenTopics(fsys, filepath.Join(dir, TopicsFile)); err != nil {
		return nil, err
	}
	if s.SubscriptionGroups, err = OpenSubscriptionGroups(fsys, filepath.Join(dir, SubscriptionGroupsFile)); err != nil {
		return nil, err
	}
	if s.ConsumerOffsets, err = OpenConsumerOffsets(fsys, filepath.Join(dir, ConsumerOffsetsFile)); err != nil {
		return nil, err
	}
	if s.DelayOffsets, err = OpenDelayOffsets(fsys, filepath.Join(dir, DelayOffsetsFile)); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir returns the directory the store was opened on.
func (s *Store) Dir() string { return s.dir }

// PersistAll persists every dirty table. It tries all four even if one
// fails and returns the failures joined; a table that failed stays dirty.
func (s *Store) PersistAll() error {
	return errors.Join(
		s.Topics.Persist(),
		s.SubscriptionGroups.Persist(),
		s.ConsumerOffsets.Persist(),
		s.DelayOffsets.Persist(),
	)
}

// Snapshot is a copy of all four tables, JSON-serialisable, as a master
// ships it to its slaves.
type Snapshot struct {
	Topics             TopicsSnapshot             `json:"topics"`
	SubscriptionGroups SubscriptionGroupsSnapshot `json:"subscriptionGroups"`
	ConsumerOffsets    OffsetsSnapshot            `json:"consumerOffsets"`
	DelayOffsets       DelayOffsetsSnapshot       `json:"delayOffsets"`
}

// Snapshot copies the four tables. Each table is copied atomically; the
// four copies are not one atomic cut across tables (neither are RocketMQ's).
func (s *Store) Snapshot() Snapshot {
	return Snapshot{
		Topics:             s.Topics.Snapshot(),
		SubscriptionGroups: s.SubscriptionGroups.Snapshot(),
		ConsumerOffsets:    s.ConsumerOffsets.Snapshot(),
		DelayOffsets:       s.DelayOffsets.Snapshot(),
	}
}

// Apply applies snap to the four tables with each table's rule
// (version-gated replace for topics and subscription groups, merge by
// maximum for consumer and delay offsets) in RocketMQ's order: topics,
// consumer offsets, delay offsets, subscription groups. snap is validated
// entirely first: if any part is invalid, nothing is applied and the error
// wraps ErrInvalid. Apply does not persist; call PersistAll.
func (s *Store) Apply(snap Snapshot) error {
	if err := snap.Topics.validate(); err != nil {
		return fmt.Errorf("meta: apply snapshot: topics: %w", err)
	}
	if err := snap.ConsumerOffsets.validate(); err != nil {
		return fmt.Errorf("meta: apply snapshot: consumer offsets: %w", err)
	}
	if err := snap.DelayOffsets.validate(); err != nil {
		return fmt.Errorf("meta: apply snapshot: delay offsets: %w", err)
	}
	if err := snap.SubscriptionGroups.validate(); err != nil {
		return fmt.Errorf("meta: apply snapshot: subscription groups: %w", err)
	}
	s.Topics.applyValid(snap.Topics)
	s.ConsumerOffsets.applyValid(snap.ConsumerOffsets)
	s.DelayOffsets.applyValid(snap.DelayOffsets)
	s.SubscriptionGroups.applyValid(snap.SubscriptionGroups)
	return nil
}
