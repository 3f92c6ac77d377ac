package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/keelmq/keel/sdk/storehost"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/sdk"
)

// Runner is a flush strategy as a benchmark cell drives it: it is started
// against the cell's store (through an sdk.Host, so a real
// plugins/flush-strategies plugin and an emulation are driven alike), its
// Policy tells the cell what a producer's ack waits for, and it is stopped
// when the run ends.
//
// Policy may be called at any time, before Start too (the cell opens the
// store according to it); Start is called once, before any append; Stop is called once, after the producers have stopped
// and before the store is closed, and must return only when the runner's
// goroutines have exited. The host given to Start stays valid until Stop
// returns; its Flush calls are what the cell counts as fsyncs.
type Runner interface {
	// Start begins flushing. An error fails the cell.
	Start(ctx context.Context, host sdk.Host) error
	// Policy is what an ack waits for.
	Policy() sdk.FlushPolicy
	// Stop ends flushing.
	Stop(ctx context.Context) error
}

// PluginRunner adapts an sdk.FlushStrategy (a builtin plugin, or a
// go-plugin client of an external one) to Runner. It calls Configure with
// cfg at once and reads AckPolicy; Start and Stop are the plugin's.
func PluginRunner(ctx context.Context, p sdk.FlushStrategy, cfg sdk.Config) (Runner, error) {
	if err := p.Configure(ctx, cfg); err != nil {
		return nil, fmt.Errorf("configure flush plugin %q: %w", cfg.Name, err)
	}
	return &pluginRunner{p: p, cfg: cfg, pol: p.AckPolicy()}, nil
}

type pluginRunner struct {
	p   sdk.FlushStrategy
	cfg sdk.Config
	pol sdk.FlushPolicy
}

func (r *pluginRunner) Start(ctx context.Context, host sdk.Host) error {
	if err := r.p.Start(ctx, host); err != nil {
		return fmt.Errorf("start flush plugin %q: %w", r.cfg.Name, err)
	}
	return nil
}

func (r *pluginRunner) Policy() sdk.FlushPolicy { return r.pol }

func (r *pluginRunner) Stop(ctx context.Context) error { return r.p.Stop(ctx) }

// FlushFactory makes a fresh Runner for one run of a cell.
type FlushFactory func() (Runner, error)

// FlushImpl is a registered flush implementation.
type FlushImpl struct {
	New FlushFactory
	// Impl says what runs: "emulated" (this package's stand-in) or
	// "plugin" (the real plugin).
	Impl string
}

var (
	regMu    sync.Mutex
	flushReg = map[[2]string]FlushImpl{}
)

// RegisterFlush makes name (a flush axis value) in mode ("builtin" or
// "external") run with f. impl is reported with the cell ("emulated" or
// "plugin"). A later registration of the same name and mode replaces an
// earlier one, so the real plugin can take over from the emulation.
func RegisterFlush(name, mode, impl string, f FlushFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	flushReg[[2]string{name, mode}] = FlushImpl{New: f, Impl: impl}
}

// LookupFlush returns the registered implementation of name in mode.
func LookupFlush(name, mode string) (FlushImpl, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	f, ok := flushReg[[2]string{name, mode}]
	return f, ok
}

func init() {
	RegisterFlush("sync", "builtin", "emulated", func() (Runner, error) { return NewSyncFlush(storehost.DefaultFlushTimeout), nil })
	RegisterFlush("async", "builtin", "emulated", func() (Runner, error) { return NewAsyncFlush(500 * time.Millisecond), nil })
	RegisterFlush("buffered", "builtin", "emulated", func() (Runner, error) {
		return NewBufferedFlush(200*time.Millisecond, 500*time.Millisecond), nil
	})
}

// loop runs background goroutines until Stop.
type loop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	err    atomic.Pointer[error]
}

func (l *loop) goRun(ctx context.Context, f func(ctx context.Context) error) {
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := f(ctx); err != nil && ctx.Err() == nil {
			l.err.Store(&err)
		}
	}()
}

func (l *loop) stop() error {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

// SyncFlush emulates the "sync" flush strategy: RocketMQ's
// GroupCommitService. One goroutine waits for new committed bytes, calls
// Host.Flush (one fdatasync covering everything committed so far) and
// waits again, so every append that arrives during an fdatasync joins the
// next one. Acks wait for the flush (FLUSH_DISK_TIMEOUT after timeout);
// consumers see only flushed records.
type SyncFlush struct {
	timeout time.Duration
	l       loop
}

// NewSyncFlush returns the group-commit emulation.
func NewSyncFlush(timeout time.Duration) *SyncFlush { return &SyncFlush{timeout: timeout} }

// Start implements Runner.
func (s *SyncFlush) Start(ctx context.Context, host sdk.Host) error {
	p, err := host.Positions(ctx)
	if err != nil {
		return err
	}
	s.l.goRun(ctx, func(ctx context.Context) error {
		after := p.Flushed
		for {
			if _, err := host.WaitCommitted(ctx, after); err != nil {
				return err
			}
			f, err := host.Flush(ctx)
			if err != nil {
				return err
			}
			after = f
		}
	})
	return nil
}

// Policy implements Runner.
func (s *SyncFlush) Policy() sdk.FlushPolicy {
	return sdk.FlushPolicy{WaitFlush: true, Timeout: s.timeout, VisibleAfterFlush: true}
}

// Stop implements Runner.
func (s *SyncFlush) Stop(ctx context.Context) error { return ignoreClosed(s.l.stop()) }

// AsyncFlush emulates the "async" flush strategy: RocketMQ's
// FlushRealTimeService, one Host.Flush every interval; acks do not wait.
type AsyncFlush struct {
	interval time.Duration
	l        loop
}

// NewAsyncFlush returns the periodic-flush emulation.
func NewAsyncFlush(interval time.Duration) *AsyncFlush { return &AsyncFlush{interval: interval} }

// Start implements Runner.
func (a *AsyncFlush) Start(ctx context.Context, host sdk.Host) error {
	a.l.goRun(ctx, func(ctx context.Context) error {
		t := time.NewTicker(a.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if _, err := host.Flush(ctx); err != nil {
					return err
				}
			}
		}
	})
	return nil
}

// Policy implements Runner.
func (a *AsyncFlush) Policy() sdk.FlushPolicy { return sdk.FlushPolicy{} }

// Stop implements Runner.
func (a *AsyncFlush) Stop(ctx context.Context) error { return ignoreClosed(a.l.stop()) }

// BufferedFlush emulates the "buffered" strategy (RocketMQ's transient
// store pool): Host.Commit every commitEvery moves write-buffered bytes
// into the files, Host.Flush every flushEvery makes them durable; acks do
// not wait. The core store has no separate write buffer (appends land in
// the mapped segment), so Commit only reports the offset and the run
// measures the periodic-flush cost.
type BufferedFlush struct {
	commitEvery, flushEvery time.Duration
	l                       loop
}

// NewBufferedFlush returns the write-buffer emulation.
func NewBufferedFlush(commitEvery, flushEvery time.Duration) *BufferedFlush {
	return &BufferedFlush{commitEvery: commitEvery, flushEvery: flushEvery}
}

// Start implements Runner.
func (b *BufferedFlush) Start(ctx context.Context, host sdk.Host) error {
	b.l.goRun(ctx, func(ctx context.Context) error {
		ct := time.NewTicker(b.commitEvery)
		ft := time.NewTicker(b.flushEvery)
		defer ct.Stop()
		defer ft.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ct.C:
				if _, err := host.Commit(ctx); err != nil {
					return err
				}
			case <-ft.C:
				if _, err := host.Flush(ctx); err != nil {
					return err
				}
			}
		}
	})
	return nil
}

// Policy implements Runner.
func (b *BufferedFlush) Policy() sdk.FlushPolicy { return sdk.FlushPolicy{WriteBuffer: true} }

// Stop implements Runner.
func (b *BufferedFlush) Stop(ctx context.Context) error { return ignoreClosed(b.l.stop()) }

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, sdk.ErrUnavailable) {
		return nil
	}
	return err
}
