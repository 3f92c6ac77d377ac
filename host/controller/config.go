package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Defaults of Config.
const (
	// DefaultHeartbeatTimeout is how long a broker may stay silent before
	// the leader counts it dead, when its heartbeat names no timeout.
	DefaultHeartbeatTimeout = 3 * time.Second
	// DefaultScanInterval is how often the leader checks every group.
	DefaultScanInterval = 500 * time.Millisecond
	// DefaultApplyTimeout bounds one raft Apply on the leader.
	DefaultApplyTimeout = 3 * time.Second
	// DefaultRaftTimeout is raft's heartbeat and election timeout (a
	// follower that hears no leader for this long starts an election).
	DefaultRaftTimeout = time.Second
)

// Peer is one member of the controller raft group.
type Peer struct {
	// ID is the raft server id, unique in the group.
	ID string
	// Addr is its raft transport address ("host:port").
	Addr string
}

// Config configures a Controller. Zero durations take the defaults.
type Config struct {
	// NodeID is this controller's raft server id; it must be one of Peers.
	NodeID string
	// RaftAddr is the address the raft TCP transport binds and
	// advertises; it must equal this node's Peer.Addr.
	RaftAddr string
	// RemotingAddr is the client-facing remoting address of the server
	// the handlers are registered on. The leader announces it through the
	// raft log so that followers can name it in CONTROLLER_NOT_LEADER.
	RemotingAddr string
	// Dir holds the raft log, stable store (raft.db) and snapshots.
	Dir string
	// Peers is the initial raft configuration, used only when Dir holds no
	// raft state yet (bootstrap). One peer works alone; three tolerate one
	// failure.
	Peers []Peer
	// HeartbeatTimeout: see DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// ScanInterval: see DefaultScanInterval.
	ScanInterval time.Duration
	// ApplyTimeout: see DefaultApplyTimeout.
	ApplyTimeout time.Duration
	// RaftTimeout: see DefaultRaftTimeout. The leader lease is half of it.
	RaftTimeout time.Duration
	// ElectUnclean allows electing a member outside the SyncStateSet when
	// no member of it is alive (RocketMQ enableElectUncleanMaster); such
	// a master may lack acknowledged writes. Default false.
	ElectUnclean bool
	// Logger receives the controller's and raft's logs. Default
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with defaults filled in, or an error naming the
// first bad field.
func (c Config) withDefaults() (Config, error) {
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ScanInterval <= 0 {
		c.ScanInterval = DefaultScanInterval
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.RaftTimeout <= 0 {
		c.RaftTimeout = DefaultRaftTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("NodeID is empty"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("Dir is empty"))
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		errs = append(errs, fmt.Errorf("RaftAddr %q: %w", c.RaftAddr, err))
	}
	if len(c.Peers) == 0 {
		errs = append(errs, errors.New("Peers is empty"))
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	self := false
	for _, p := range c.Peers {
		if p.ID == "" || p.Addr == "" {
			errs = append(errs, fmt.Errorf("peer %+v needs an ID and an Addr", p))
		}
		if ids[p.ID] || addrs[p.Addr] {
			errs = append(errs, fmt.Errorf("peer %+v repeats an ID or an Addr", p))
		}
		ids[p.ID], addrs[p.Addr] = true, true
		if p.ID == c.NodeID {
			self = true
			if p.Addr != c.RaftAddr {
				errs = append(errs, fmt.Errorf("peer %s has Addr %s, RaftAddr is %s", p.ID, p.Addr, c.RaftAddr))
			}
		}
	}
	if c.NodeID != "" && len(c.Peers) > 0 && !self {
		errs = append(errs, fmt.Errorf("NodeID %s is not among Peers", c.NodeID))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("controller config: %w", err)
	}
	return c, nil
}
