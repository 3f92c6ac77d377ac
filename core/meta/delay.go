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
	t       table
	offsets map[int32]int64 // guarded by t.mu
}

// OpenDelayOffsets loads the table from path (see Open for how a missing or
// corrupt file is handled). Later Persist calls write to path.
func OpenDelayOffsets(fsys vfs.FS, path string) (*DelayOffsets, error) {
	d := &DelayOffsets{t: table{fsys: fsys, path: path, version: newVersion()}, offsets: map[int32]int64{}}
	var s DelayOffsetsSnapshot
	found, err := load(fsys, path, &s)
	if err != nil {
		return nil, err
	}
	if found {
		if err := s.validate(); err != nil {
			return nil, fmt.Errorf("meta: %s: %w", path, err)
		}
		d.t.version = s.DataVersion
		if s.Offsets != nil {
			d.offsets = s.Offsets
		}
	}
	return d, nil
}

// Version returns the table's current data version.
func (d *DelayOffsets) Version() DataVersion { return d.t.currentVersion() }

// Dirty reports whether the table changed since it was loaded or last
// persisted.
func (d *DelayOffsets) Dirty() bool { return d.t.dirty() }

// Persist writes the table atomically if it changed since it was loaded or
// last persisted; otherwise it does nothing. On error the table stays dirty.
func (d *DelayOffsets) Persist() error {
	return d.t.persist(func() any { return DelayOffsetsSnapshot{DataVersion: d.t.version, Offsets: d.offsets} })
}

// Set records offset for level (>= 1), replacing the old value even if it is
// lower. Errors wrap ErrInvalid.
func (d *DelayOffsets) Set(level int32, offset int64) error {
	if err := validateDelay(level, offset); err != nil {
		return fmt.Errorf("meta: set delay offset: %w", err)
	}
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	if old, ok := d.offsets[level]; ok && old == offset {
		return nil
	}
	d.offsets[level] = offset
	d.t.changedLocked()
	return nil
}

// Get returns the offset of level; ok is false if none was set.
func (d *DelayOffsets) Get(level int32) (offset int64, ok bool) {
	d.t.mu.RLock()
	defer d.t.mu.RUnlock()
	offset, ok = d.offsets[level]
	return offset, ok
}

// All returns a copy of every level's offset.
func (d *DelayOffsets) All() map[int32]int64 {
	d.t.mu.RLock()
	defer d.t.mu.RUnlock()
	return maps.Clone(d.offsets)
}

// Snapshot returns a copy of the table and its version.
func (d *DelayOffsets) Snapshot() DelayOffsetsSnapshot {
	d.t.mu.RLock()
	defer d.t.mu.RUnlock()
	return DelayOffsetsSnapshot{DataVersion: d.t.version, Offsets: maps.Clone(d.offsets)}
}

// Apply merges s into the table by maximum per level, for the same reason
// as ConsumerOffsets.Apply: lowering a delay offset would deliver delayed
// messages a second time. (RocketMQ overwrites the slave's file with the
// master's.) The version advances when an offset was raised or added, and
// changed reports that. An invalid snapshot is rejected whole with an error
// wrapping ErrInvalid.
func (d *DelayOffsets) Apply(s DelayOffsetsSnapshot) (changed bool, err error) {
	if err := s.validate(); err != nil {
		return false, fmt.Errorf("meta: apply delay offsets snapshot: %w", err)
	}
	return d.applyValid(s), nil
}

func (d *DelayOffsets) applyValid(s DelayOffsetsSnapshot) bool {
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	changed := false
	for level, off := range s.Offsets {
		if cur, ok := d.offsets[level]; !ok || off > cur {
			d.offsets[level] = off
			changed = true
		}
	}
	if changed {
		d.t.changedLocked()
	}
	return changed
}
