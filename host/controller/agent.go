package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// DefaultAgentInterval is the agent's heartbeat interval when none is
// given (RocketMQ brokerHeartbeatInterval).
const DefaultAgentInterval = time.Second

// AgentConfig configures a broker's Agent.
type AgentConfig struct {
	// Client reaches the controllers; the agent does not close it.
	Client *Client
	// Registration is the broker's identity and addresses.
	Registration Registration
	// Interval between heartbeats (and registration retries). Default
	// DefaultAgentInterval.
	Interval time.Duration
	// Timeout is sent as heartbeatTimeoutMills: how long the controller
	// may wait for the next heartbeat; 0 leaves the controller's default.
	// It must exceed Interval.
	Timeout time.Duration
	// Priority is sent as electionPriority (lower wins among equals).
	Priority int32
	// Position returns the broker's last epoch, max offset and confirm
	// offset for each heartbeat. Required; called from the agent's
	// goroutine.
	Position func() (epoch int32, maxOffset, confirmOffset int64)
	// OnChange, when set, is called from the agent's goroutine with the
	// broker's id and its group's state whenever the master, the master
	// epoch or the SyncStateSet differs from the last call (the first
	// time right after registration). It must not block for long.
	OnChange func(brokerID int64, g Group)
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Agent is a broker's side of the controller: it registers, then sends a
// heartbeat every Interval and reports role changes. Its methods are safe
// for concurrent use.
type Agent struct {
	cfg AgentConfig
	log *slog.Logger

	mu      sync.Mutex
	id      int64
	group   Group
	known   bool
	contact time.Time
}

// NewAgent validates cfg and returns an agent that is not running.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultAgentInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("Client is nil"))
	}
	if cfg.Position == nil {
		errs = append(errs, errors.New("Position is nil"))
	}
	r := cfg.Registration
	if r.Group.Cluster == "" || r.Group.BrokerName == "" || r.Addr == "" {
		errs = append(errs, fmt.Errorf("Registration %+v needs a cluster, a broker name and an address", r))
	}
	if cfg.Timeout != 0 && cfg.Timeout <= cfg.Interval {
		errs = append(errs, fmt.Errorf("Timeout %v must exceed Interval %v", cfg.Timeout, cfg.Interval))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("controller agent: %w", err)
	}
	return &Agent{cfg: cfg, log: cfg.Logger.With("component", "controller-agent", "group", r.Group.String(), "addr", r.Addr)}, nil
}

// Run registers (retrying every Interval) and then heartbeats until ctx
// ends; it returns ctx's error. A heartbeat refused with ErrNeedRegister
// (the controller lost the member, e.g. a new cluster) registers again.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		a.tick(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (a *Agent) tick(ctx context.Context) {
	callCtx, cancel := context.WithTimeout(ctx, a.cfg.Interval)
	defer cancel()
	sent := time.Now()
	id := a.BrokerID()
	if id == 0 {
		id, g, err := a.cfg.Client.Register(callCtx, a.cfg.Registration)
		if err != nil {
			a.log.Warn("registering with the controller; retrying", "err", err)
			return
		}
		a.observe(id, g, sent)
		return
	}
	epoch, maxOffset, confirm := a.cfg.Position()
	g, err := a.cfg.Client.Heartbeat(callCtx, Heartbeat{
		Group: a.cfg.Registration.Group, BrokerID: id, Addr: a.cfg.Registration.Addr,
		Epoch: epoch, MaxOffset: maxOffset, ConfirmOffset: confirm,
		Timeout: a.cfg.Timeout, Priority: a.cfg.Priority,
	})
	if errors.Is(err, ErrNeedRegister) {
		a.log.Warn("the controller does not know this broker; registering again", "err", err)
		a.mu.Lock()
		a.id = 0
		a.mu.Unlock()
		return
	}
	if err != nil {
		a.log.Warn("heartbeat to the controller failed", "err", err)
		return
	}
	a.observe(id, g, sent)
}

// observe records a successful answer to a call sent at sent and calls
// OnChange when the group's roles changed.
func (a *Agent) observe(id int64, g Group, sent time.Time) {
	a.mu.Lock()
	changed := !a.known || a.id != id || a.group.MasterID != g.MasterID || a.group.MasterEpoch != g.MasterEpoch ||
		a.group.SyncStateSetEpoch != g.SyncStateSetEpoch || !slices.Equal(a.group.SyncStateSet, g.SyncStateSet)
	a.id, a.group, a.known = id, g, true
	if sent.After(a.contact) {
		a.contact = sent
	}
	a.mu.Unlock()
	if changed && a.cfg.OnChange != nil {
		a.cfg.OnChange(id, g)
	}
}

// BrokerID returns the id the controller gave this broker, 0 until it
// registered.
func (a *Agent) BrokerID() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.id
}

// Group returns the group's state from the last answer; ok is false
// before the first.
func (a *Agent) Group() (g Group, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.group.clone(), a.known
}

// Leased reports whether a master may still acknowledge writes under a
// lease of the given length: the last answered call was sent less than
// lease ago and the connection it was answered on is still open. The
// second condition matters because the leader elects at once when a
// broker's heartbeat connection closes (RocketMQ onBrokerChannelClose),
// without waiting for the heartbeat timeout. lease must be shorter than
// the controller's heartbeat timeout.
func (a *Agent) Leased(lease time.Duration) bool {
	c := a.LastContact()
	return !c.IsZero() && time.Since(c) < lease && a.cfg.Client.leaderConnOpen()
}

// LastContact returns when the last call the controller leader answered
// was sent (zero before any). A master's lease runs from it: the leader
// had heard from the broker no earlier than that, so while now -
// LastContact is below the controller's heartbeat timeout the leader has
// not yet counted the broker dead.
func (a *Agent) LastContact() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.contact
}
