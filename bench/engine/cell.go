package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// cell is one open benchmark cell: the master store, its storehost, and
// the flush runner, replication and index started on it.
type cell struct {
	spec   Spec
	store  *core.Store
	sh     *storehost.Host
	host   *countingHost // sh as the flush runner sees it, counting fsyncs
	runner Runner
	repl   Replication // nil without replication
	ix     Indexer     // nil without an index
	fpol   sdk.FlushPolicy
	rpol   sdk.ReplicationPolicy

	closed bool
}

// openCell makes the cell's plugins with spec.Loader and starts them in
// spec.Dir (which exists): the store opened according to the flush and
// replication policies, then the index, the flush runner and the
// replication. It always returns the cell, opened as far as it got, and
// the caller shuts it down on every path: shutdown stops and releases
// whatever was made, external processes included.
func openCell(ctx context.Context, spec Spec) (*cell, error) {
	c, pl, ld := spec.Cell, spec.Plugins, spec.Loader
	cl := &cell{spec: spec}
	var err error
	if cl.runner, err = ld.Flush(ctx, pl.Flush); err != nil {
		return cl, fmt.Errorf("make flush %q: %w", c.Flush, err)
	}
	cl.fpol = cl.runner.Policy()
	renv := cl.replEnv()
	if pl.Replication != nil {
		if err := vfs.OS.MkdirAll(renv.StateDir, 0o755); err != nil {
			return cl, fmt.Errorf("create replication dir: %w", err)
		}
		if cl.repl, err = ld.Replication(ctx, *pl.Replication, renv); err != nil {
			return cl, fmt.Errorf("make replication %q: %w", c.Replication, err)
		}
		cl.rpol = cl.repl.Policy()
	}
	opts := core.Options{Dir: filepath.Join(spec.Dir, "master"), SegmentSize: spec.SegmentSize, Logger: spec.Logger, Retention: Retention,
		MaxMessageSize: MaxMessageSize(spec.SegmentSize)}
	storehost.ApplyFlushPolicy(&opts, cl.fpol)
	proxy := &confirmProxy{}
	if cl.rpol.VisibleAfterReplicated {
		opts.Confirm = proxy
	}
	if pl.Index != nil {
		idir := filepath.Join(spec.Dir, "index")
		if err := vfs.OS.MkdirAll(idir, 0o755); err != nil {
			return cl, fmt.Errorf("create index dir: %w", err)
		}
		if cl.ix, err = ld.Index(ctx, *pl.Index, idir); err != nil {
			return cl, fmt.Errorf("make index %q: %w", c.Index, err)
		}
		opts.Listeners = []core.DispatchListener{cl.ix}
	}
	if cl.store, err = core.Open(opts); err != nil {
		return cl, fmt.Errorf("open cell store: %w", err)
	}
	cl.sh = storehost.New(cl.store, spec.Logger)
	proxy.h.Store(cl.sh)
	cl.host = &countingHost{Host: cl.sh}
	if cl.ix != nil {
		if err := cl.ix.Start(ctx, cl.sh); err != nil {
			return cl, fmt.Errorf("start index %q: %w", c.Index, err)
		}
	}
	if err := cl.runner.Start(ctx, cl.host); err != nil {
		return cl, fmt.Errorf("start flush %q: %w", c.Flush, err)
	}
	if cl.repl != nil {
		if err := cl.repl.Start(ctx, cl.sh, renv); err != nil {
			return cl, fmt.Errorf("start replication %q: %w", c.Replication, err)
		}
	}
	return cl, nil
}

func (cl *cell) replEnv() ReplEnv {
	return ReplEnv{SlaveDir: filepath.Join(cl.spec.Dir, "slave"), StateDir: filepath.Join(cl.spec.Dir, "repl"),
		SegmentSize: cl.spec.SegmentSize, Logger: cl.spec.Logger}
}

// waitUnfenced waits (up to 30 s) until a replicating master takes writes:
// it may start fenced until its replica's handshake (sdk/replication's
// start_fenced = "empty").
func (cl *cell) waitUnfenced(ctx context.Context) error {
	if cl.repl == nil {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		fenced, why := cl.sh.Fenced()
		if !fenced {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("replication %q: master still fenced after 30 s: %s", cl.spec.Cell.Replication, why)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// shutdown stops and releases what was made, in reverse order of
// starting — replication, flush runner — then closes the store and the
// index, and returns the errors of the first three. It handles a cell
// opened part way (openCell's error paths). A second call does nothing.
func (cl *cell) shutdown() error {
	if cl.closed {
		return nil
	}
	cl.closed = true
	var errs []error
	if cl.repl != nil {
		errs = append(errs, cl.repl.Stop(context.Background()))
	}
	if cl.runner != nil {
		errs = append(errs, cl.runner.Stop(context.Background()))
	}
	if cl.store != nil {
		errs = append(errs, cl.store.Close())
	}
	if cl.ix != nil {
		cl.ix.Close()
	}
	return errors.Join(errs...)
}

// countingHost counts the flushes that made new bytes durable.
type countingHost struct {
	*storehost.Host
	flushes atomic.Int64
	last    atomic.Int64
}

func (c *countingHost) Flush(ctx context.Context) (int64, error) {
	f, err := c.Host.Flush(ctx)
	if err == nil {
		for {
			l := c.last.Load()
			if f <= l {
				break
			}
			if c.last.CompareAndSwap(l, f) {
				c.flushes.Add(1)
				break
			}
		}
	}
	return f, err
}

// FlushAfter implements sdk.FlushAfterer through the counted Flush (the
// embedded storehost's would bypass the count).
func (c *countingHost) FlushAfter(ctx context.Context, after int64) (int64, error) {
	return sdk.WaitThenFlush(ctx, c, after)
}

// confirmProxy lets the store be opened before its storehost exists.
type confirmProxy struct {
	h atomic.Pointer[storehost.Host]
}

func (c *confirmProxy) ConfirmOffset() int64 {
	if h := c.h.Load(); h != nil {
		return h.ConfirmOffset()
	}
	return 0
}
