package indexhash

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Clean deletes the index files whose every entry points below minOffset
// (RocketMQ: endPhyOffset < the commitlog minimum), oldest first, never the
// last file nor the one the durable checkpoint names (a later Clean after
// a Sync deletes it), and returns how many it deleted. The retention loop calls it
// with host.Positions().Min; it is safe to call at any time.
func (x *Index) Clean(minOffset int64) (int, error) {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateOpen {
		return 0, x.errState("clean")
	}
	n := 0
	var errs []error
	ck := x.ckw.last
	for len(x.files) > 1 && x.files[0].h.endPhy < minOffset {
		f := x.files[0]
		if ck.hasFile && f.created >= ck.lastFile {
			break // the checkpoint names it: kept until a Sync moves past it
		}
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
		if err := x.o.fs.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("index-hash: remove %s: %w", f.path, err))
		}
		x.files = x.files[1:]
		x.dirDirty = true
		x.st.filesDeleted.Add(1)
		n++
	}
	if n > 0 {
		x.o.log.Info("index-hash: deleted index files below the commitlog minimum", "files", n, "min_offset", minOffset)
	}
	return n, errors.Join(errs...)
}

func (x *Index) cleanLoop(every time.Duration) {
	defer x.loopWG.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if b := x.host.Load(); b != nil {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			p, err := b.h.Positions(ctx)
			if err == nil {
				_, err = x.Clean(p.Min)
			}
			if err == nil {
				err = x.reconcile(ctx, b.h)
			}
			cancel()
			if err != nil && x.state.Load() == stateOpen {
				x.st.cleanFailures.Add(1)
				x.o.log.Warn("index-hash: retention check failed", "err", err)
			}
		}
		select {
		case <-x.stop:
			return
		case <-t.C:
		}
	}
}
