package engine

import (
	"context"
	"fmt"

	"github.com/keelmq/keel/sdk"
)

// Runner is a flush strategy as a benchmark cell drives it: it is started
// against the cell's store (through an sdk.Host, as the host process
// drives a plugin), its Policy tells the cell what a producer's ack waits
// for, and it is stopped when the run ends.
//
// Policy may be called at any time, before Start too (the cell opens the
// store according to it); Start is called at most once, before any
// append; Stop is called exactly once, whether or not Start was called or
// succeeded, after the producers have stopped and before the store is
// closed, and must return only when the runner's goroutines have exited
// and what made it (an external process) is gone. The host given to Start
// stays valid until Stop returns; its Flush calls are what the cell counts
// as fsyncs.
type Runner interface {
	// Start begins flushing. An error fails the cell.
	Start(ctx context.Context, host sdk.Host) error
	// Policy is what an ack waits for.
	Policy() sdk.FlushPolicy
	// Stop ends flushing and releases the runner.
	Stop(ctx context.Context) error
}

// PluginRunner adapts an sdk.FlushStrategy (a builtin plugin, or a
// go-plugin client of an external one) to Runner. It calls Configure with
// cfg at once and reads AckPolicy; Start is the plugin's; Stop is the
// plugin's Stop when Start succeeded, then release (which may be nil). On
// error release has been called.
func PluginRunner(ctx context.Context, p sdk.FlushStrategy, cfg sdk.Config, release func()) (Runner, error) {
	if release == nil {
		release = func() {}
	}
	if err := p.Configure(ctx, cfg); err != nil {
		release()
		return nil, fmt.Errorf("configure flush plugin %q: %w", cfg.Name, err)
	}
	return &pluginRunner{p: p, cfg: cfg, pol: p.AckPolicy(), release: release}, nil
}

type pluginRunner struct {
	p       sdk.FlushStrategy
	cfg     sdk.Config
	pol     sdk.FlushPolicy
	release func()
	started bool
}

func (r *pluginRunner) Start(ctx context.Context, host sdk.Host) error {
	if err := r.p.Start(ctx, host); err != nil {
		return fmt.Errorf("start flush plugin %q: %w", r.cfg.Name, err)
	}
	r.started = true
	return nil
}

func (r *pluginRunner) Policy() sdk.FlushPolicy { return r.pol }

func (r *pluginRunner) Stop(ctx context.Context) error {
	var err error
	if r.started {
		err = r.p.Stop(ctx)
	}
	r.release()
	return err
}
