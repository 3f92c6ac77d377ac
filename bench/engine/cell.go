package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// impls are what a cell's axis values run: the flush implementation
// always, replication and index when the cell has them (New nil when
// "none").
type impls struct {
	flush FlushImpl
	repl  ReplImpl
	index IndexImpl
}

// resolve looks the cell's axis values up in the registries; a value with
// nothing registered in the cell's mode fails with ErrUnavailable.
func resolve(c matrix.Cell) (impls, error) {
	var im impls
	var ok bool
	if im.flush, ok = LookupFlush(c.Flush, c.Mode); !ok {
		return im, fmt.Errorf("flush %q in %s mode: no implementation registered: %w", c.Flush, c.Mode, ErrUnavailable)
	}
	if c.Replication != "none" {
		if im.repl, ok = LookupReplication(c.Replication, c.Mode); !ok {
			return im, fmt.Errorf("replication %q in %s mode: no implementation registered: %w", c.Replication, c.Mode, ErrUnavailable)
		}
	}
	if c.Index != "none" {
		if im.index, ok = LookupIndex(c.Index, c.Mode); !ok {
			return im, fmt.Errorf("index %q in %s mode: no implementation registered: %w", c.Index, c.Mode, ErrUnavailable)
		}
	}
	return im, nil
}

// describe is Result.Impl: what ran for each axis.
func (im impls) describe() string {
	orNone := func(impl string) string {
		if impl == "" {
			return "none"
		}
		return impl
	}
	return "flush=" + im.flush.Impl + " repl=" + orNone(im.repl.Impl) + " index=" + orNone(im.index.Impl)
}

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

	runnerUp bool
	closed   bool
}

// openCell builds the cell's parts in spec.Dir (which exists) and starts
// them: the store opened according to the flush and replication policies,
// then the index, the flush runner and the replication. On error it
// returns the cell opened so far (nil if nothing was), which the caller
// shuts down.
func openCell(ctx context.Context, spec Spec, im impls) (*cell, error) {
	c := spec.Cell
	runner, err := im.flush.New()
	if err != nil {
		return nil, fmt.Errorf("make flush runner %q: %w", c.Flush, err)
	}
	cl := &cell{spec: spec, runner: runner, fpol: runner.Policy()}
	renv := cl.replEnv()
	if im.repl.New != nil {
		if err := vfs.OS.MkdirAll(renv.StateDir, 0o755); err != nil {
			return nil, fmt.Errorf("create replication dir: %w", err)
		}
		if cl.repl, err = im.repl.New(renv); err != nil {
			return nil, fmt.Errorf("make replication %q: %w", c.Replication, err)
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
	if im.index.New != nil {
		idir := filepath.Join(spec.Dir, "index")
		if err := vfs.OS.MkdirAll(idir, 0o755); err != nil {
			return nil, fmt.Errorf("create index dir: %w", err)
		}
		if cl.ix, err = im.index.New(idir); err != nil {
			return nil, fmt.Errorf("make index %q: %w", c.Index, err)
		}
		opts.Listeners = []core.DispatchListener{cl.ix}
	}
	if cl.store, err = core.Open(opts); err != nil {
		if cl.ix != nil {
			cl.ix.Close()
		}
		return nil, fmt.Errorf("open cell store: %w", err)
	}
	cl.sh = storehost.New(cl.store, spec.Logger)
	proxy.h.Store(cl.sh)
	cl.host = &countingHost{Host: cl.sh}
	if cl.ix != nil {
		if err := cl.ix.Start(ctx, cl.sh); err != nil {
			return cl, fmt.Errorf("start index %q: %w", c.Index, err)
		}
	}
	if err := runner.Start(ctx, cl.host); err != nil {
		return cl, fmt.Errorf("start flush %q: %w", c.Flush, err)
	}
	cl.runnerUp = true
	if cl.repl != nil {
		if err := cl.repl.Start(ctx, cl.sh, renv); err != nil {
			// shutdown still stops the replication: what it started before
			// failing (a master, an external process) must not outlive the
			// cell.
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

// shutdown stops what runs, in reverse order of starting — replication,
// flush runner — then closes the store and the index, and returns the
// errors of the first three. A second call does nothing.
func (cl *cell) shutdown() error {
	if cl.closed {
		return nil
	}
	cl.closed = true
	var errs []error
	if cl.repl != nil {
		errs = append(errs, cl.repl.Stop(context.Background()))
	}
	if cl.runnerUp {
		errs = append(errs, cl.runner.Stop(context.Background()))
	}
	errs = append(errs, cl.store.Close())
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
