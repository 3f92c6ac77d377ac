package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// pluginPair runs a real replication plugin as a master (on the cell's
// store) and a second instance as its slave (on a slave store in the same
// process), connected over 127.0.0.1 by the plugins' own HA protocol.
type pluginPair struct {
	name       string // the axis value, for errors
	newRepl    replFactory
	addr       string // the master's HA address
	master     sdk.Replicator
	slave      sdk.Replicator
	slaveStore *core.Store
	pol        sdk.ReplicationPolicy
	started    []sdk.Replicator
	cleanups   []func()
}

// replFactory returns a fresh replicator, unconfigured, the sdk.Config
// for role ("master" or "slave") without addresses, secret or DataDir,
// and what to do after its Stop (kill an external plugin's process). On
// error nothing is left running.
type replFactory func(role string) (sdk.Replicator, sdk.Config, func(), error)

const benchSecret = "keel-bench-secret"

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// newPluginPair is a Replication running the replicator newRepl makes as
// the cell's master and a second one as its slave on a slave store in
// env.SlaveDir, connected over 127.0.0.1 (a port free a moment ago). On
// error nothing it started is left running.
func newPluginPair(name string, newRepl replFactory, env ReplEnv) (Replication, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &pluginPair{name: name, newRepl: newRepl, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	m, cfg, cleanup, err := newRepl("master")
	if err != nil {
		return nil, err
	}
	p.master = m
	p.cleanups = append(p.cleanups, cleanup)
	dir := filepath.Join(env.StateDir, "master")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.cleanup()
		return nil, err
	}
	cfg.Addr, cfg.Secret, cfg.DataDir = p.addr, benchSecret, dir
	if err := p.master.Configure(context.Background(), cfg); err != nil {
		p.cleanup()
		return nil, fmt.Errorf("configure %s replication master: %w", name, err)
	}
	p.pol = p.master.AckPolicy()
	return p, nil
}

func (p *pluginPair) cleanup() {
	for _, c := range p.cleanups {
		c()
	}
	p.cleanups = nil
}

func (p *pluginPair) Policy() sdk.ReplicationPolicy { return p.pol }

func (p *pluginPair) Start(ctx context.Context, master *storehost.Host, env ReplEnv) error {
	if err := p.master.Start(ctx, master); err != nil {
		return fmt.Errorf("start %s replication master: %w", p.name, err)
	}
	p.started = append(p.started, p.master)
	st, err := core.Open(core.Options{Dir: env.SlaveDir, SegmentSize: env.SegmentSize, Logger: env.Logger, Retention: Retention,
		MaxMessageSize: MaxMessageSize(env.SegmentSize)})
	if err != nil {
		return fmt.Errorf("open slave store: %w", err)
	}
	p.slaveStore = st
	dir := filepath.Join(env.StateDir, "slave")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sl, cfg, cleanup, err := p.newRepl("slave")
	if err != nil {
		return err
	}
	p.slave = sl
	p.cleanups = append(p.cleanups, cleanup)
	cfg.PeerAddr, cfg.Secret, cfg.DataDir = p.addr, benchSecret, dir
	if err := p.slave.Configure(ctx, cfg); err != nil {
		return fmt.Errorf("configure %s replication slave: %w", p.name, err)
	}
	if err := p.slave.Start(ctx, storehost.New(st, env.Logger)); err != nil {
		return fmt.Errorf("start %s replication slave: %w", p.name, err)
	}
	p.started = append(p.started, p.slave)
	return nil
}

func (p *pluginPair) Stop(ctx context.Context) error {
	var errs []error
	for i := len(p.started) - 1; i >= 0; i-- {
		errs = append(errs, p.started[i].Stop(ctx))
	}
	p.cleanup()
	if p.slaveStore != nil {
		errs = append(errs, p.slaveStore.Close())
	}
	return errors.Join(errs...)
}
