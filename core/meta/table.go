package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"sync"

	"github.com/keelmq/keel/core/vfs"
)

// table is the persistence machinery shared by the four tables: the file,
// the data version and the dirty tracking. Each table embeds it and keeps
// its content beside it, guarded by mu.
type table struct {
	fsys vfs.FS
	path string

	// persistMu serialises Persist calls so two writers never race on the
	// temp file. It is taken before mu.
	persistMu sync.Mutex

	// mu guards the fields below and the owning table's content.
	mu      sync.RWMutex
	version DataVersion
	// seq counts changes since open; persisted is the seq last written.
	seq, persisted uint64
}

// snapshot is what a table file holds, JSON-encoded: one of the four
// snapshot types (TopicsSnapshot, SubscriptionGroupsSnapshot,
// OffsetsSnapshot, DelayOffsetsSnapshot).
type snapshot interface {
	// dataVersion is the version of the table the snapshot copies.
	dataVersion() DataVersion
	// validate returns nil if the snapshot keeps its table's rules, and an
	// error wrapping ErrInvalid otherwise.
	validate() error
}

// open points t at path and loads the snapshot stored there into s, a
// pointer to the table's snapshot type; t takes the snapshot's version. If
// the file does not exist, s is left alone and t starts with a fresh
// version. A file that cannot be read, is not JSON or breaks the table's
// rules (s.validate) is an error naming the file (see Open).
func (t *table) open(fsys vfs.FS, path string, s snapshot) error {
	t.fsys, t.path, t.version = fsys, path, newVersion()
	found, err := load(fsys, path, s)
	if err != nil || !found {
		return err
	}
	if err := s.validate(); err != nil {
		return fmt.Errorf("meta: %s: %w", path, err)
	}
	t.version = s.dataVersion()
	return nil
}

// Version returns the table's current data version.
func (t *table) Version() DataVersion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
}

// Dirty reports whether the table changed since it was loaded or last
// persisted.
func (t *table) Dirty() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.seq != t.persisted
}

// changedLocked records a change of content: the version advances and the
// table becomes dirty. mu must be held for writing.
func (t *table) changedLocked() {
	t.version = t.version.Next()
	t.seq++
}

// changedIfLocked calls changedLocked if changed is true and returns
// changed. mu must be held for writing.
func (t *table) changedIfLocked(changed bool) bool {
	if changed {
		t.changedLocked()
	}
	return changed
}

// adoptLocked records that the content was replaced by a copy whose version
// is v. mu must be held for writing.
func (t *table) adoptLocked(v DataVersion) {
	t.version = v
	t.seq++
}

// persist writes encodeLocked()'s JSON atomically if the table is dirty.
// encodeLocked runs with mu held for reading and must return a value that
// does not alias mutable state beyond the call (it is marshalled before mu
// is released). On error the table stays dirty and a later persist retries.
func (t *table) persist(encodeLocked func() any) error {
	t.persistMu.Lock()
	defer t.persistMu.Unlock()

	t.mu.RLock()
	seq := t.seq
	if seq == t.persisted {
		t.mu.RUnlock()
		return nil
	}
	data, err := json.MarshalIndent(encodeLocked(), "", "  ")
	t.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("meta: encode %s: %w", t.path, err)
	}
	if err := WriteFileAtomic(t.fsys, t.path, append(data, '\n')); err != nil {
		return fmt.Errorf("meta: persist %s: %w", t.path, err)
	}
	t.mu.Lock()
	if seq > t.persisted {
		t.persisted = seq
	}
	t.mu.Unlock()
	return nil
}

// apply is the Apply of every table: it validates s and, only if it is
// valid, hands it to applyValid. what names the table in the error, which
// wraps ErrInvalid.
func apply[S snapshot](what string, s S, applyValid func(S) bool) (changed bool, err error) {
	if err := s.validate(); err != nil {
		return false, fmt.Errorf("meta: apply %s snapshot: %w", what, err)
	}
	return applyValid(s), nil
}

// load reads path into v. It returns found=false (and leaves v alone) if the
// file does not exist; a leftover temp file is ignored either way, because
// it never holds committed state (see WriteFileAtomic). A file that exists
// but is not valid JSON is an error naming the file: the table is never
// silently started empty.
func load(fsys vfs.FS, path string, v any) (found bool, err error) {
	if _, err := fsys.Stat(path + TempSuffix); err == nil {
		slog.Debug("meta: ignoring leftover temp file from an interrupted write", "file", path+TempSuffix)
	}
	data, err := ReadFile(fsys, path)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("meta: load %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("meta: %s is corrupt (%d bytes), refusing to start with an empty table: %w", path, len(data), err)
	}
	return true, nil
}
