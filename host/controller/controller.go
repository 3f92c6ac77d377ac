package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Controller is one node of the controller raft group. Create it with
// New, register its handlers on a remoting server (Register), then Start
// it. Its methods are safe for concurrent use.
type Controller struct {
	cfg  Config
	log  *slog.Logger
	fsm  *fsm
	live *liveness
	met  *ctrlMetrics

	raft    atomic.Pointer[raft.Raft]
	ready   atomic.Bool // leader, and the state caught up and seeded
	kick    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func() error

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg and returns a controller that is not started.
func New(cfg Config) (*Controller, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Controller{
		cfg:  c,
		log:  c.Logger.With("component", "controller", "node", c.NodeID),
		fsm:  newFSM(),
		live: newLiveness(),
		met:  newCtrlMetrics(),
		kick: make(chan struct{}, 1),
	}, nil
}

// Start opens the raft stores under Dir, bootstraps the group from Peers
// when Dir holds no raft state, starts raft and the leader's scan. It
// returns once raft runs; leadership comes later. ctx bounds only the
// start; Close stops the controller. Start and Close must not run
// concurrently; a closed Controller cannot be started again.
func (c *Controller) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("starting controller %s: %w", c.cfg.NodeID, err)
	}
	if c.raft.Load() != nil || c.cancel != nil {
		return fmt.Errorf("starting controller %s: already started", c.cfg.NodeID)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	if err := c.startRaft(runCtx); err != nil {
		cancel()
		c.closeStores()
		return fmt.Errorf("starting controller %s: %w", c.cfg.NodeID, err)
	}
	c.cancel = cancel
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.run(runCtx) }()
	return nil
}

func (c *Controller) startRaft(ctx context.Context) error {
	if err := os.MkdirAll(c.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", c.cfg.Dir, err)
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, Output: slogWriter{c.log}})
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(c.cfg.Dir, "raft.db")})
	if err != nil {
		return fmt.Errorf("opening raft log store: %w", err)
	}
	c.closers = append(c.closers, store.Close)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(c.cfg.Dir, 2, hl)
	if err != nil {
		return fmt.Errorf("opening raft snapshot store: %w", err)
	}
	trans, err := raft.NewTCPTransportWithLogger(c.cfg.RaftAddr, nil, 3, 10*time.Second, hl)
	if err != nil {
		return fmt.Errorf("raft transport on %s: %w", c.cfg.RaftAddr, err)
	}
	c.closers = append(c.closers, trans.Close)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.cfg.NodeID)
	rc.Logger = hl
	rc.HeartbeatTimeout = c.cfg.RaftTimeout
	rc.ElectionTimeout = c.cfg.RaftTimeout
	rc.LeaderLeaseTimeout = c.cfg.RaftTimeout / 2
	notify := make(chan bool, 16)
	rc.NotifyCh = notify

	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return fmt.Errorf("reading raft state in %s: %w", c.cfg.Dir, err)
	}
	if !existing {
		var conf raft.Configuration
		for _, p := range c.cfg.Peers {
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(rc, store, store, snaps, trans, conf); err != nil {
			return fmt.Errorf("bootstrapping raft in %s: %w", c.cfg.Dir, err)
		}
		c.log.Info("bootstrapped the controller raft group", "peers", len(c.cfg.Peers))
	}
	r, err := raft.NewRaft(rc, c.fsm, store, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("starting raft: %w", err)
	}
	c.raft.Store(r)
	c.closers = append([]func() error{func() error { return r.Shutdown().Error() }}, c.closers...)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.watchLeadership(ctx, notify) }()
	return nil
}

// Close stops the scan and raft and closes the stores. It is idempotent.
// Brokers connected to this node see their controller go away; the other
// nodes elect a new leader.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.ready.Store(false)
		if c.cancel != nil {
			c.cancel()
		}
		c.closeErr = c.closeStores()
		c.wg.Wait()
	})
	return c.closeErr
}

func (c *Controller) closeStores() error {
	var errs []error
	for _, f := range c.closers {
		if err := f(); err != nil {
			errs = append(errs, err)
		}
	}
	c.closers = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing controller %s: %w", c.cfg.NodeID, err)
	}
	return nil
}

// Leader returns the raft leader's server id and the remoting address it
// announced; both are "" while there is no leader, and addr is "" until the
// new leader's announcement has committed.
func (c *Controller) Leader() (id, addr string) {
	r := c.raft.Load()
	if r == nil {
		return "", ""
	}
	_, lid := r.LeaderWithID()
	id = string(lid)
	if id == "" {
		return "", ""
	}
	c.fsm.read(func(s *replicated) { addr = s.Controllers[id] })
	return id, addr
}

// IsLeader reports whether this node leads and is ready to serve: its
// state caught up with the log and its liveness table is seeded.
func (c *Controller) IsLeader() bool { return c.ready.Load() }

// Group returns the state of a group as this node has applied it (on a
// follower it may lag the leader).
func (c *Controller) Group(k GroupKey) (g Group, ok bool) {
	c.fsm.read(func(s *replicated) { g, ok = s.group(k) })
	return g, ok
}

// Groups returns every group's state, sorted by key.
func (c *Controller) Groups() (gs []Group) {
	c.fsm.read(func(s *replicated) { gs = s.groups() })
	return gs
}

// Metrics returns the controller's metric set, for the host to register.
func (c *Controller) Metrics() *vm.Set { return c.met.set }

// apply commits cmd through raft on the leader and returns its result.
// It fails with ErrNotLeader on a follower or when leadership is lost
// before the entry commits.
func (c *Controller) apply(cmd command) (applyResult, error) {
	r := c.raft.Load()
	if r == nil || r.State() != raft.Leader {
		return applyResult{}, fmt.Errorf("committing %s: %w", cmd.Type, ErrNotLeader)
	}
	b, err := encodeCommand(cmd)
	if err != nil {
		return applyResult{}, err
	}
	f := r.Apply(b, c.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
			return applyResult{}, fmt.Errorf("committing %s: %v: %w", cmd.Type, err, ErrNotLeader)
		}
		return applyResult{}, fmt.Errorf("committing %s through raft: %w", cmd.Type, err)
	}
	res, ok := f.Response().(applyResult)
	if !ok {
		return applyResult{}, fmt.Errorf("committing %s: unexpected state machine answer %T", cmd.Type, f.Response())
	}
	return res, res.Err
}

// watchLeadership follows raft's leadership changes. On becoming leader
// it waits for the state to catch up (Barrier), seeds the liveness table,
// announces its remoting address and starts electing; on losing it, it
// forgets every heartbeat.
func (c *Controller) watchLeadership(ctx context.Context, notify <-chan bool) {
	r := c.raft.Load()
	for {
		select {
		case <-ctx.Done():
			return
		case leader := <-notify:
			c.ready.Store(false)
			c.live.reset()
			if !leader {
				c.log.Info("lost controller leadership")
				continue
			}
			if err := r.Barrier(c.cfg.ApplyTimeout).Error(); err != nil {
				c.log.Warn("controller leader could not catch up; waiting for the next leadership change", "err", err)
				continue
			}
			c.live.seed(c.Groups(), time.Now())
			if _, err := c.apply(command{Type: cmdAnnounce, Announce: &announceCmd{ServerID: c.cfg.NodeID, RemotingAddr: c.cfg.RemotingAddr}}); err != nil {
				c.log.Warn("announcing the controller leader's address", "err", err)
			}
			c.ready.Store(true)
			c.log.Info("became controller leader", "groups", len(c.Groups()))
			c.kickScan()
		}
	}
}

// kickScan asks the scan loop for a scan now.
func (c *Controller) kickScan() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// slogWriter carries raft's hclog lines into slog, at the level hclog
// wrote in the line.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	line := string(trimNewline(p))
	level := slog.LevelInfo
	switch {
	case strings.Contains(line, "[ERROR]"):
		level = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		level = slog.LevelWarn
	case strings.Contains(line, "[DEBUG]"), strings.Contains(line, "[TRACE]"):
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, line, "source", "raft")
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}
