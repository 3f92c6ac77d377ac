package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/keelmq/keel/sdk"
)

// Runner is a flush strategy as a benchmark cell drives it: it is started
// against the cell's store (through an sdk.Host, as the host process
// drives a plugin), its Policy tells the cell what a producer's ack waits for, and it is stopped
// when the run ends.
//
// Policy may be called at any time, before Start too (the cell opens the
// store according to it); Start is called once, before any append; Stop is
// called once, after the producers have stopped and before the store is
// closed, and must return only when the runner's
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
	// Impl says what runs, for the report: "plugin" (the plugin itself)
	// for everything keel registers.
	Impl string
}

var (
	regMu    sync.Mutex
	flushReg = map[[2]string]FlushImpl{}
)

// RegisterFlush makes name (a flush axis value) in mode ("builtin" or
// "external") run with f. impl is reported with the cell ("plugin"). A
// later registration of the same name and mode replaces an earlier one.
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
