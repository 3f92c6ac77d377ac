package meta

import (
	"fmt"
	"maps"

	"github.com/keelmq/keel/core/vfs"
)

// DelayOffsetsSnapshot is a copy of the delay offset table, as stored in
// delayOffset.json and as shipped by replication: delay level → offset in
// the schedule topic's queue for that level up to which delayed messages
// have been delivered.
type DelayOffsetsSnapshot struct {
	DataVersion DataVersion     `json:"dataVersion"` // the table's version
	Offsets     map[int32]int64 `json:"offsetTable"` // level → offset
}

func (s DelayOffsetsSnapshot) dataVersion() DataVersion { return s.DataVersion }

func (s DelayOffsetsSnapshot) validate() error {
	for level, off := range s.Offsets {
		if err := validateDelay(level, off); err != nil {
			return err
		}
	}
	return nil
}

func validateDelay(level int32, offset int64) error {
	if level < 1 {
		return fmt.Errorf("%w: delay level %d below 1", ErrInvalid, level)
	}
	if offset < 0 {
		return fmt.Errorf("%w: negative offset %d for delay level %d", ErrInvalid, offset, level)
	}
	return nil
}

// DelayOffsets is the delay offset table of the scheduled-message service.
// It is safe for concurrent use.
type DelayOffsets struct {
	table
	offsets map[int32]int64 // guarded by mu
}

// OpenDelayOffsets loads the table from path (see Open for how a missing or
// corrupt file is handled). Later Persist calls write to path.
func OpenDelayOffsets(fsys vfs.FS, path string) (*DelayOffsets, error) {
	d := &DelayOffsets{}
	var s DelayOffsetsSnapshot
	if err := d.open(fsys, path, &s); err != nil {
		return nil, err
	}
	d.offsets = orEmpty(s.Offsets)
	return d, nil
}

// Persist writes the table atomically if it changed since it was loaded or
// last persisted; otherwise it does nothing. On error the table stays dirty.
func (d *DelayOffsets) Persist() error {
	return d.persist(func() any { return DelayOffsetsSnapshot{DataVersion: d.version, Offsets: d.offsets} })
}

// Set records offset for level (>= 1), replacing the old value even if it is
// lower. Errors wrap ErrInvalid.
func (d *DelayOffsets) Set(level int32, offset int64) error {
	if err := validateDelay(level, offset); err != nil {
		return fmt.Errorf("meta: set delay offset: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	setLocked(&d.table, d.offsets, level, offset)
	return nil
}

// Get returns the offset of level; ok is false if none was set.
func (d *DelayOffsets) Get(level int32) (offset int64, ok bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	offset, ok = d.offsets[level]
	return offset, ok
}

// All returns a copy of every level's offset.
func (d *DelayOffsets) All() map[int32]int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return maps.Clone(d.offsets)
}

// Snapshot returns a copy of the table and its version.
func (d *DelayOffsets) Snapshot() DelayOffsetsSnapshot {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return DelayOffsetsSnapshot{DataVersion: d.version, Offsets: maps.Clone(d.offsets)}
}

// Apply merges s into the table by maximum per level, for the same reason
// as ConsumerOffsets.Apply: lowering a delay offset would deliver delayed
// messages a second time. (RocketMQ overwrites the slave's file with the
// master's.) The version advances when an offset was raised or added, and
// changed reports that. An invalid snapshot is rejected whole with an error
// wrapping ErrInvalid.
func (d *DelayOffsets) Apply(s DelayOffsetsSnapshot) (changed bool, err error) {
	return apply("delay offsets", s, d.applyValid)
}

func (d *DelayOffsets) applyValid(s DelayOffsetsSnapshot) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changedIfLocked(mergeMax(d.offsets, s.Offsets))
}
