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

// recover loads the directory. Callers hold syncMu and mu.
func (x *Index) recover() error {
	fsys, log := x.o.fs, x.o.log
	if _, err := fsys.Stat(x.dir); errors.Is(err, fs.ErrNotExist) {
		if err := fsys.MkdirAll(x.dir, 0o755); err != nil {
			return fmt.Errorf("index-hash: create %s: %w", x.dir, err)
		}
		if err := fsys.SyncDir(filepath.Dir(x.dir)); err != nil {
			return fmt.Errorf("index-hash: sync the parent of %s: %w", x.dir, err)
		}
	}
	ckPath := filepath.Join(x.dir, CheckpointFile)
	ck, exists, ckErr := readCheckpoint(fsys, ckPath)
	if ckErr != nil && !exists {
		return fmt.Errorf("index-hash: %w", ckErr)
	}
	names, err := fsys.ReadDir(x.dir)
	if err != nil {
		return fmt.Errorf("index-hash: list %s: %w", x.dir, err)
	}
	var created []int64
	for _, n := range names {
		if ms, ok := parseFileName(n); ok {
			created = append(created, ms)
			x.lastName = max(x.lastName, ms)
		}
	}
	slices.Sort(created)
	reset := func(why string) error {
		x.st.resets.Add(1)
		log.Error("index-hash: discarding the index; records dispatched before now will not be found by key", "dir", x.dir, "reason", why)
		for _, f := range x.files {
			f.close()
		}
		x.files = nil
		for _, ms := range created {
			if err := fsys.Remove(filepath.Join(x.dir, fileName(ms))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("index-hash: remove %s: %w", fileName(ms), err)
			}
		}
		ck = checkpoint{slots: int32(x.cfg.HashSlots)}
		return nil
	}
	switch {
	case ckErr != nil: // exists but unreadable
		if err := reset(ckErr.Error()); err != nil {
			return err
		}
	case !exists:
		if len(created) > 0 {
			if err := reset("index files without a checkpoint"); err != nil {
				return err
			}
		}
		ck = checkpoint{slots: int32(x.cfg.HashSlots)}
	case ck.slots != int32(x.cfg.HashSlots):
		return fmt.Errorf("index-hash: %s was made with hash_slots = %d, the configuration says %d (hash_slots is fixed for an index directory): %w",
			x.dir, ck.slots, x.cfg.HashSlots, sdk.ErrInvalidConfig)
	default:
		if err := x.load(ck, created); err != nil {
			var fatal *fatalError
			if errors.As(err, &fatal) {
				return fatal.err
			}
			if err := reset(err.Error()); err != nil {
				return err
			}
		}
	}
	x.slots = ck.slots
	if len(x.files) == 0 {
		ck.hasFile, ck.lastFile, ck.h = false, 0, header{}
	}
	x.indexedEnd = ck.indexedEnd
	if err := fsys.SyncDir(x.dir); err != nil {
		return fmt.Errorf("index-hash: sync %s: %w", x.dir, err)
	}
	// The checkpoint is rewritten not clean before anything changes, so a
	// crash from here on recovers.
	var f vfs.File
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
	x.durableEnd.Store(x.indexedEnd)
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
