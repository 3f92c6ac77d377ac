package indexhash

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk"
)

// Index implements sdk.Indexer. For each record that is not a transaction
// rollback it adds its UNIQ_KEY and every key of its KEYS property as
// topic#key (RocketMQ IndexService.buildIndex). A record at an offset the
// index has already passed cuts the index back to that offset first (see
// the type's documentation), so re-dispatch never duplicates entries.
// batch is not retained. An error (disk full while creating a file, or a
// failed checkpoint write while cutting back) leaves the index holding a
// prefix of the batch; calling Index again with the same records repairs
// it.
func (x *Index) Index(ctx context.Context, batch []sdk.Record) error {
	if len(batch) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateOpen {
		return x.errState("index")
	}
	var topic string
	var th int32 // hash of topic + "#"
	for i := range batch {
		r := &batch[i]
		if x.seen(r.PhysOffset) {
			x.mu.Unlock()
			err := x.truncateTo(r.PhysOffset)
			x.mu.Lock()
			if err != nil {
				return err
			}
			if x.state.Load() != stateOpen {
				return x.errState("index")
			}
		}
		x.st.records.Add(1)
		if record.TransactionType(r.SysFlag) != record.SysFlagTransactionRollback {
			if i == 0 || r.Topic != topic {
				topic = r.Topic
				th = hashContinue(hashContinue(0, topic), "#")
			}
			if r.UniqKey != "" {
				if err := x.put(absHash(hashContinue(th, r.UniqKey)), r); err != nil {
					return err
				}
			}
			for k := range record.IndexKeys(r.Keys) {
				if err := x.put(absHash(hashContinue(th, k)), r); err != nil {
					return err
				}
			}
		} else {
			x.st.rollbacks.Add(1)
		}
		x.indexedEnd = r.PhysOffset + max(int64(r.Size), 1)
	}
	return nil
}

// seen reports whether the index has already passed offset off: it is
// below the end of the last record indexed, or not above the offset of
// the newest entry (a record whose keys were partly put before an error).
func (x *Index) seen(off int64) bool {
	if off < x.indexedEnd {
		return true
	}
	if n := len(x.files); n > 0 && !x.files[n-1].empty() && off <= x.files[n-1].h.endPhy {
		return true
	}
	return false
}

// put adds one key of r. Callers hold mu.
func (x *Index) put(hash int32, r *sdk.Record) error {
	f, err := x.writable()
	if err != nil {
		return err
	}
	f.put(hash, r.PhysOffset, r.StoreTimestamp)
	x.st.keys.Add(1)
	return nil
}

// writable returns the last file, creating one when there is none or it
// is full. The last file owns its slot table (indexFile.own); a full one
// spills it, to be made durable by the next Sync, before a newer file
// makes it one that recovery trusts. Callers hold mu.
func (x *Index) writable() (*indexFile, error) {
	n := len(x.files)
	if n > 0 && !x.files[n-1].full() {
		return x.files[n-1], nil
	}
	created := max(x.o.now().UnixMilli(), x.lastName+1)
	f, err := createFile(x.o.fs, x.dir, created, x.slots, int32(x.cfg.EntriesPerFile))
	if err != nil {
		return nil, fmt.Errorf("index-hash: %w", err)
	}
	if n > 0 {
		x.files[n-1].spill()
	}
	f.own(true)
	x.lastName = created
	x.files = append(x.files, f)
	x.dirDirty = true
	x.st.filesCreated.Add(1)
	return f, nil
}

// truncateTo cuts the index back to commitlog offset p: afterwards it
// holds exactly the entries of records below p. Callers hold neither lock.
func (x *Index) truncateTo(p int64) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateOpen {
		return x.errState("truncate")
	}
	return x.truncateLocked(p)
}

// reconcile cuts the index back to the end of the log when it holds
// entries at or beyond it: records the index saw before a crash or a
// truncation that the log no longer has, and that no re-dispatch will
// replace unless new records arrive there. The dispatcher never goes past
// the committed offset, so nothing the index holds beyond it is current.
func (x *Index) reconcile(ctx context.Context, host sdk.Host) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateOpen {
		return x.errState("reconcile")
	}
	p, err := host.Positions(ctx)
	if err != nil {
		return fmt.Errorf("index-hash: reconcile with the log: %w", err)
	}
	if !x.seen(p.Committed) {
		return nil
	}
	x.o.log.Info("index-hash: cutting back entries beyond the end of the log", "committed", p.Committed, "indexed_end", x.indexedEnd)
	return x.truncateLocked(p.Committed)
}

// truncateLocked is truncateTo with syncMu and mu held.
func (x *Index) truncateLocked(p int64) error {
	// keep is the number of files that keep entries; the last of them is
	// cut to k entries.
	keep := len(x.files)
	for keep > 0 && (x.files[keep-1].empty() || x.files[keep-1].h.beginPhy >= p) {
		keep--
	}
	var k int32 = 1
	if keep > 0 {
		k = x.files[keep-1].firstAtOrAbove(p)
	}
	if ck := x.ckw.last; p < ck.indexedEnd {
		// Lower the durable checkpoint first: what stays below p is
		// durable (it is below the old checkpoint), and after a crash the
		// files beyond are dropped and the slots rebuilt.
		nc := checkpoint{slots: x.slots, indexedEnd: p}
		if keep > 0 {
			f := x.files[keep-1]
			nc.hasFile, nc.lastFile, nc.h = true, f.created, f.headerAt(k)
			nc.h.usedSlots = 0
		}
		if err := x.ckw.write(nc); err != nil {
			return fmt.Errorf("index-hash: cut back to %d: %w", p, err)
		}
		x.durableEnd.Store(p)
	}
	var errs []error
	cut := int64(0)
	for _, f := range x.files[keep:] {
		cut += int64(f.h.count - 1)
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
		if err := x.o.fs.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("index-hash: remove %s: %w", f.path, err))
		}
		x.dirDirty = true
		x.st.filesDeleted.Add(1)
	}
	x.files = x.files[:keep]
	if keep > 0 {
		f := x.files[keep-1]
		cut += int64(f.h.count - k)
		f.truncate(k)
		f.own(false) // the last file again; the checkpoint now names it, so recovery rebuilds its table
	}
	x.indexedEnd = p
	x.st.truncations.Add(1)
	x.st.truncatedKeys.Add(cut)
	x.o.log.Debug("index-hash: cut back", "offset", p, "entries", cut)
	return errors.Join(errs...)
}
