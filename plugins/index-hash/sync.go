package indexhash

import (
	"context"
	"fmt"
)

// Sync implements sdk.Indexer: it makes every record indexed before the
// call durable and records that in the checkpoint. It waits for disk I/O
// but blocks Index and Query only while it notes what to write. After an
// error nothing is known about what is durable beyond the previous Sync;
// a later Sync retries.
func (x *Index) Sync(ctx context.Context) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	if x.state.Load() != stateOpen {
		return x.errState("sync")
	}
	return x.syncHeld()
}

// syncHeld is Sync with syncMu held.
func (x *Index) syncHeld() error {
	x.mu.Lock()
	var dirty []*indexFile
	for _, f := range x.files {
		if f.dirty {
			dirty = append(dirty, f)
			f.dirty = false
		}
	}
	dirDirty := x.dirDirty
	x.dirDirty = false
	ck := checkpoint{slots: x.slots, indexedEnd: x.indexedEnd}
	for i := len(x.files) - 1; i >= 0; i-- {
		if f := x.files[i]; !f.empty() {
			ck.hasFile, ck.lastFile, ck.h = true, f.created, f.h
			break
		}
	}
	x.mu.Unlock()
	last := x.ckw.last
	last.seq = 0
	if len(dirty) == 0 && !dirDirty && last == ck {
		return nil
	}
	x.st.syncs.Add(1)
	fail := func(err error) error {
		x.st.syncFailures.Add(1)
		x.mu.Lock()
		for _, f := range dirty {
			f.dirty = true
		}
		x.dirDirty = x.dirDirty || dirDirty
		x.mu.Unlock()
		return err
	}
	for _, f := range dirty {
		if err := f.f.Datasync(); err != nil {
			return fail(fmt.Errorf("index-hash: sync %s: %w", f.path, err))
		}
	}
	if dirDirty {
		if err := x.o.fs.SyncDir(x.dir); err != nil {
			return fail(fmt.Errorf("index-hash: sync %s: %w", x.dir, err))
		}
	}
	if err := x.ckw.write(ck); err != nil {
		return fail(fmt.Errorf("index-hash: %w", err))
	}
	x.durableEnd.Store(ck.indexedEnd)
	return nil
}
