package indexhash

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
)

// open opens dir, recovering it when the last run did not stop cleanly.
func (x *Index) open(dir string, cfg Config) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateNew {
		return fmt.Errorf("index-hash: configure: already configured: %w", sdk.ErrInvalidConfig)
	}
	x.cfg, x.dir = cfg, dir
	if err := x.recover(); err != nil {
		for _, f := range x.files {
			f.close()
		}
		x.files = nil
		if x.ckw != nil {
			x.ckw.f.Close()
			x.ckw = nil
		}
		return err
	}
	x.state.Store(stateOpen)
	return nil
}

// recover loads the directory: it creates it if missing, reads the
// checkpoint, loads the index files it covers (or discards the index when
// they cannot be trusted), and rewrites the checkpoint not clean before
// anything changes, so a crash from then on recovers. A checkpoint made
// with other hash_slots fails it with sdk.ErrInvalidConfig. Callers hold
// syncMu and mu; on error they close what recover opened.
func (x *Index) recover() error {
	if err := x.ensureDir(); err != nil {
		return err
	}
	ckPath := filepath.Join(x.dir, CheckpointFile)
	ck, exists, ckErr := readCheckpoint(x.o.fs, ckPath)
	if ckErr != nil && !exists {
		return fmt.Errorf("index-hash: %w", ckErr)
	}
	created, err := x.listFiles()
	if err != nil {
		return err
	}
	if ck, err = x.adopt(ck, exists, ckErr, created); err != nil {
		return err
	}
	x.slots = ck.slots
	if len(x.files) == 0 {
		ck.hasFile, ck.lastFile, ck.h = false, 0, header{}
	}
	x.indexedEnd = ck.indexedEnd
	if n := len(x.files); n > 0 && !x.files[n-1].full() {
		x.files[n-1].own(false)
	}
	if err := x.o.fs.SyncDir(x.dir); err != nil {
		return fmt.Errorf("index-hash: sync %s: %w", x.dir, err)
	}
	if err := x.markOpen(ckPath, ck, exists); err != nil {
		return err
	}
	x.durableEnd.Store(x.indexedEnd)
	return nil
}

// ensureDir creates the index directory, durably, if it does not exist.
func (x *Index) ensureDir() error {
	fsys := x.o.fs
	if _, err := fsys.Stat(x.dir); errors.Is(err, fs.ErrNotExist) {
		if err := fsys.MkdirAll(x.dir, 0o755); err != nil {
			return fmt.Errorf("index-hash: create %s: %w", x.dir, err)
		}
		if err := fsys.SyncDir(filepath.Dir(x.dir)); err != nil {
			return fmt.Errorf("index-hash: sync the parent of %s: %w", x.dir, err)
		}
	}
	return nil
}

// listFiles returns the creation times of the directory's index files,
// in order, and raises lastName to the newest.
func (x *Index) listFiles() ([]int64, error) {
	names, err := x.o.fs.ReadDir(x.dir)
	if err != nil {
		return nil, fmt.Errorf("index-hash: list %s: %w", x.dir, err)
	}
	var created []int64
	for _, n := range names {
		if ms, ok := parseFileName(n); ok {
			created = append(created, ms)
			x.lastName = max(x.lastName, ms)
		}
	}
	slices.Sort(created)
	return created, nil
}

// adopt decides what the directory holds, given its checkpoint ck (exists
// says whether there is one, ckErr why it is unreadable) and its index
// files created. It loads the files a readable checkpoint covers; it
// discards the index (reset) when the checkpoint is unreadable, missing
// while files exist, or inconsistent with them; and it refuses a
// checkpoint made with other hash_slots. It returns the checkpoint the
// index now stands at (an empty one with the configured slots after a
// reset or when there was none).
func (x *Index) adopt(ck checkpoint, exists bool, ckErr error, created []int64) (checkpoint, error) {
	empty := checkpoint{slots: int32(x.cfg.HashSlots)}
	switch {
	case ckErr != nil: // exists but unreadable
		if err := x.reset(ckErr.Error(), created); err != nil {
			return ck, err
		}
		return empty, nil
	case !exists:
		if len(created) > 0 {
			if err := x.reset("index files without a checkpoint", created); err != nil {
				return ck, err
			}
		}
		return empty, nil
	case ck.slots != int32(x.cfg.HashSlots):
		return ck, fmt.Errorf("index-hash: %s was made with hash_slots = %d, the configuration says %d (hash_slots is fixed for an index directory): %w",
			x.dir, ck.slots, x.cfg.HashSlots, sdk.ErrInvalidConfig)
	default:
		if err := x.load(ck, created); err != nil {
			var fatal *fatalError
			if errors.As(err, &fatal) {
				return ck, fatal.err
			}
			if err := x.reset(err.Error(), created); err != nil {
				return ck, err
			}
			return empty, nil
		}
		return ck, nil
	}
}

// reset discards the index for the reason why: it counts and logs the
// reset, closes the loaded files and removes every index file in
// created. Records dispatched before it are no longer found by key.
func (x *Index) reset(why string, created []int64) error {
	x.st.resets.Add(1)
	x.o.log.Error("index-hash: discarding the index; records dispatched before now will not be found by key", "dir", x.dir, "reason", why)
	for _, f := range x.files {
		f.close()
	}
	x.files = nil
	for _, ms := range created {
		if err := x.o.fs.Remove(filepath.Join(x.dir, fileName(ms))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("index-hash: remove %s: %w", fileName(ms), err)
		}
	}
	return nil
}

// markOpen opens the checkpoint at ckPath for writing (creating it unless
// exists) and rewrites it from ck, not clean and at indexedEnd, so a
// crash from here on recovers; a new checkpoint's directory entry is
// synced.
func (x *Index) markOpen(ckPath string, ck checkpoint, exists bool) error {
	fsys := x.o.fs
	var f vfs.File
	var err error
	if exists {
		f, err = fsys.OpenReadWrite(ckPath)
	} else {
		f, err = fsys.Create(ckPath)
	}
	if err != nil {
		return fmt.Errorf("index-hash: open checkpoint for writing: %w", err)
	}
	x.ckw = &checkpointWriter{f: f, last: checkpoint{seq: ck.seq}}
	ck.clean = false
	ck.indexedEnd = x.indexedEnd
	if err := x.ckw.write(ck); err != nil {
		return fmt.Errorf("index-hash: %w", err)
	}
	if !exists {
		if err := fsys.SyncDir(x.dir); err != nil {
			return fmt.Errorf("index-hash: sync %s: %w", x.dir, err)
		}
	}
	return nil
}

// fatalError is a load error that must fail the open instead of resetting
// the index (a configuration mismatch).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

// load opens the files a valid checkpoint covers and deletes newer ones.
func (x *Index) load(ck checkpoint, created []int64) error {
	fsys := x.o.fs
	for _, ms := range created {
		if !ck.hasFile || ms > ck.lastFile {
			x.o.log.Info("index-hash: removing an index file newer than the checkpoint", "file", fileName(ms))
			if err := fsys.Remove(filepath.Join(x.dir, fileName(ms))); err != nil {
				return &fatalError{fmt.Errorf("index-hash: remove %s: %w", fileName(ms), err)}
			}
			continue
		}
		f, err := openFile(fsys, x.dir, fileName(ms), ck.slots)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			return err
		}
		x.files = append(x.files, f)
	}
	if !ck.hasFile {
		return nil
	}
	if len(x.files) == 0 || x.files[len(x.files)-1].created != ck.lastFile {
		return fmt.Errorf("the checkpoint's last file %s is missing", fileName(ck.lastFile))
	}
	for _, f := range x.files[:len(x.files)-1] {
		if err := f.validHeader(); err != nil {
			return err
		}
	}
	last := x.files[len(x.files)-1]
	if ck.h.count > last.entries {
		return fmt.Errorf("checkpoint count %d exceeds the %d entries of %s", ck.h.count, last.entries, last.path)
	}
	if ck.clean && last.h == ck.h {
		return nil
	}
	// Not stopped cleanly: the durable entries [1,count) are trusted, the
	// slot table and header are rebuilt from them.
	x.st.recoveries.Add(1)
	x.o.log.Info("index-hash: recovering after a crash", "file", last.path, "entries", ck.h.count-1, "indexed_end", ck.indexedEnd)
	last.h = ck.h
	last.rebuildSlots(ck.h.count)
	return nil
}
