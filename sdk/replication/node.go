package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/metricset"
)

// Roles, the sdk's (Config.Role).
const (
	RoleMaster = sdk.RoleMaster
	RoleSlave  = sdk.RoleSlave
)

// FullConfig is the [<section>.config] table Node.Configure decodes: every
// key this package understands. The async and sync plugins decode their
// own narrower tables and call Node.Setup.
type FullConfig struct {
	CommonConfig
	AckOn                  string   `toml:"ack_on"`
	WaitReplicas           int      `toml:"wait_replicas"`
	MinInSyncReplicas      *int     `toml:"min_in_sync_replicas"`
	Timeout                Duration `toml:"timeout"`
	VisibleAfterReplicated bool     `toml:"visible_after_replicated"`
}

// Node is a complete master/slave replicator built from this package's
// blocks: it implements sdk.Replicator, sdk.Promoter, sdk.ForceWriter,
// sdk.StatusReporter and sdk.MetricsWriter.
//
// As master it listens on sdk.Config.Addr (port 0 allowed; Addr returns
// the bound address, Status shows it), authenticates each slave
// (ServerAuth), compares logs (Decide), then streams committed log bytes
// to each slave and reports acknowledged offsets, in-sync replicas and any
// fence to the host. As slave it connects to sdk.Config.PeerAddr with
// reconnect backoff, authenticates (ClientAuth), sends its State, follows
// the master's Plan (truncating to the consistent point), appends what
// the master streams at identical offsets, acknowledges, and applies the
// master's metadata snapshots (merged by maximum by the host).
//
// A slave reports itself fenced to the host (writes come only from its
// master). A master reports fenced while its log may be behind a replica's
// (see Decide and Options.StartFenced) until a handshake clears it or
// ForceWrites is called.
//
// Methods are safe for concurrent use after Configure.
type Node struct {
	opts Options
	cfg  sdk.Config
	log  *slog.Logger

	mu      sync.Mutex // role changes
	host    sdk.Host
	role    string
	peer    string // a slave's master address
	m       *master
	s       *slave
	state   *stateStore
	started bool
	stopped bool

	met     counters
	metrics *metricset.Set
}

// NewNode returns an unconfigured Node.
func NewNode() *Node {
	n := &Node{}
	n.metrics = newMetrics(n)
	return n
}

var (
	_ sdk.Replicator     = (*Node)(nil)
	_ sdk.Promoter       = (*Node)(nil)
	_ sdk.ForceWriter    = (*Node)(nil)
	_ sdk.StatusReporter = (*Node)(nil)
	_ sdk.MetricsWriter  = (*Node)(nil)
)

// Configure decodes FullConfig from cfg and calls Setup.
func (n *Node) Configure(ctx context.Context, cfg sdk.Config) error {
	var fc FullConfig
	if err := DecodeConfig(cfg, &fc); err != nil {
		return err
	}
	return n.Setup(cfg, fc.Options())
}

// Options returns the Options these keys describe (zero = default; the
// Policy is the default one).
func (fc FullConfig) Options() Options {
	o := fc.CommonConfig.Options()
	o.AckOn, o.WaitReplicas, o.Timeout, o.VisibleAfterReplicated = fc.AckOn, fc.WaitReplicas, fc.Timeout.D(), fc.VisibleAfterReplicated
	if fc.MinInSyncReplicas != nil {
		o.AllowFewer, o.MinInSyncReplicas = true, *fc.MinInSyncReplicas
	}
	return o
}

// Setup applies cfg (role, addresses, secret, data dir) and opts (zero
// fields take defaults). Errors wrap sdk.ErrInvalidConfig. It must be
// called once, before Start.
func (n *Node) Setup(cfg sdk.Config, opts Options) error {
	opts = opts.WithDefaults()
	section := cfg.Section
	if section == "" {
		section = string(sdk.KindReplication)
	}
	if err := opts.validate(section + ".config."); err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	switch cfg.Role {
	case "", RoleMaster:
		cfg.Role = RoleMaster
	case RoleSlave:
		if cfg.PeerAddr == "" {
			return fmt.Errorf("%w: %s: a slave needs the master's HA address (replication.master_addr)", sdk.ErrInvalidConfig, cfg.File)
		}
	default:
		return fmt.Errorf("%w: %s: role %q: want %q or %q", sdk.ErrInvalidConfig, cfg.File, cfg.Role, RoleMaster, RoleSlave)
	}
	if opts.NodeID == "" {
		opts.NodeID = cfg.Addr
	}
	n.cfg, n.opts, n.role, n.peer = cfg, opts, cfg.Role, cfg.PeerAddr
	n.log = slog.Default().With("plugin", cfg.Name, "component", "replication")
	return nil
}

// Options returns the options in force (after defaults).
func (n *Node) Options() Options { return n.opts }

// AckPolicy implements sdk.Replicator.
func (n *Node) AckPolicy() sdk.ReplicationPolicy {
	o := n.opts
	p := sdk.ReplicationPolicy{WaitReplicas: o.WaitReplicas, Timeout: o.Timeout, VisibleAfterReplicated: o.VisibleAfterReplicated}
	if o.allowFewer() {
		p.AllowFewer, p.MinReplicas = true, o.MinInSyncReplicas
	}
	return p
}

// Start implements sdk.Plugin: it loads the node's state from DataDir and
// starts the configured role. A master has its listener bound and its
// first state (possibly fenced) reported before Start returns.
func (n *Node) Start(ctx context.Context, host sdk.Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		return errors.New("replication: Start called twice")
	}
	if n.opts.BatchSize == 0 {
		return errors.New("replication: Start before Configure")
	}
	st, err := openState(n.cfg.DataDir)
	if err != nil {
		return err
	}
	n.state, n.host, n.started = st, host, true
	if n.cfg.Secret == "" {
		n.log.Warn("replication secret is empty: HA peers are not authenticated")
	}
	if n.role == RoleSlave {
		return n.startSlaveLocked(ctx)
	}
	return n.startMasterLocked(ctx, false)
}

// Stop implements sdk.Plugin.
func (n *Node) Stop(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped = true
	n.stopRoleLocked()
	return nil
}

func (n *Node) stopRoleLocked() {
	if n.m != nil {
		n.m.stop()
		n.m = nil
	}
	if n.s != nil {
		n.s.stop()
		n.s = nil
	}
}

// Addr is the master's bound HA address ("" when not master).
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m != nil {
		return n.m.ln.Addr().String()
	}
	return ""
}

// Role is the current role.
func (n *Node) Role() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.role
}

func (n *Node) listenAddr() string {
	if n.cfg.Addr != "" {
		return n.cfg.Addr
	}
	return "127.0.0.1:0"
}

// startMasterLocked begins the master role. takeover: the node becomes
// master by Promote (its new epoch is a takeover and it starts unfenced).
func (n *Node) startMasterLocked(ctx context.Context, takeover bool) (err error) {
	pos, err := n.host.Positions(ctx)
	if err != nil {
		return fmt.Errorf("replication: read positions: %w", err)
	}
	hist, err := n.host.Epochs(ctx)
	if err != nil {
		return fmt.Errorf("replication: read epochs: %w", err)
	}
	st := n.state.get()
	if st.Role == RoleSlave {
		takeover = true // reconfigured from slave to master by an operator
	}
	ln, err := net.Listen("tcp", n.listenAddr())
	if err != nil {
		return fmt.Errorf("replication: listen on %s: %w", n.listenAddr(), err)
	}
	m := newMaster(n, ln, hist)
	defer func() {
		if err != nil {
			m.stop()
		}
	}()
	empty := pos.Committed == pos.Min
	fenced := !takeover && (n.opts.StartFenced == StartFencedAlways || (n.opts.StartFenced == StartFencedEmpty && empty))
	if fenced {
		why := "master started with an empty log (wiped or replaced disk?)"
		if !empty {
			why = "master restarted (start_fenced = \"always\")"
		}
		m.setFence(fenceStart, why+": refusing writes until a replica's handshake shows this log is not behind it, or an operator runs force-writes")
		m.needEpoch = true
	} else if _, err := m.beginEpoch(ctx, takeover); err != nil {
		return err
	}
	if err := n.state.update(func(s *NodeState) { s.Role = RoleMaster }); err != nil {
		return err
	}
	m.report(ctx, true)
	n.m, n.role = m, RoleMaster
	m.start()
	n.log.Info("replication master listening", "addr", ln.Addr().String(), "fenced", fenced, "takeover", takeover)
	return nil
}

func (n *Node) startSlaveLocked(ctx context.Context) error {
	if err := n.state.update(func(s *NodeState) { s.Role = RoleSlave }); err != nil {
		return err
	}
	// The host must not take producers' writes on a slave.
	if err := n.host.ReportReplication(ctx, sdk.ReplicationState{Fenced: true, Reason: "this node is a slave of " + n.peer + ": only its master writes"}); err != nil {
		return fmt.Errorf("replication: report slave state: %w", err)
	}
	s := newSlave(n, n.peer)
	n.s, n.role = s, RoleSlave
	s.start()
	n.log.Info("replication slave started", "master", n.peer)
	return nil
}

// Promote implements sdk.Promoter: a slave stops following its master,
// begins a new epoch greater than every epoch it knows at its committed
// offset (recorded as a takeover, so the old master's divergent tail is
// cut when it rejoins as slave), and serves as master on its HA address.
// On a master it returns an error.
func (n *Node) Promote(ctx context.Context) (int32, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started || n.stopped {
		return 0, fmt.Errorf("replication: promote: not running: %w", sdk.ErrUnavailable)
	}
	if n.role == RoleMaster {
		pos, _ := n.host.Positions(ctx)
		return pos.Epoch, fmt.Errorf("replication: promote: this node is already the master (epoch %d)", pos.Epoch)
	}
	n.stopRoleLocked()
	if err := n.startMasterLocked(ctx, true); err != nil {
		// Fall back to following the old master.
		if serr := n.startSlaveLocked(ctx); serr != nil {
			n.log.Error("replication: promote failed and the slave could not restart", "err", serr)
		}
		return 0, fmt.Errorf("replication: promote: %w", err)
	}
	pos, err := n.host.Positions(ctx)
	if err != nil {
		return 0, err
	}
	n.log.Warn("replication: promoted to master", "epoch", pos.Epoch, "offset", pos.Committed)
	return pos.Epoch, nil
}

// Demote makes a master (or a slave of another master) follow the master
// at peerAddr: its listener and replicas are closed, it reports itself
// fenced to the host, and connects as slave; the epoch handshake then cuts
// any divergent tail it holds. It is the runtime counterpart of changing
// the node's profile to role = "slave".
func (n *Node) Demote(ctx context.Context, peerAddr string) error {
	if peerAddr == "" {
		return fmt.Errorf("replication: demote: %w: no master address", sdk.ErrInvalidConfig)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started || n.stopped {
		return fmt.Errorf("replication: demote: not running: %w", sdk.ErrUnavailable)
	}
	n.stopRoleLocked()
	n.peer = peerAddr
	return n.startSlaveLocked(ctx)
}

// ForceWrites implements sdk.ForceWriter: a fenced master lifts every
// fence and begins a takeover epoch at its committed offset, so replicas
// holding data beyond its log are truncated when they reconnect (their
// extra data is given up, as the operator decided).
func (n *Node) ForceWrites(ctx context.Context) error {
	n.mu.Lock()
	m := n.m
	n.mu.Unlock()
	if m == nil {
		return fmt.Errorf("replication: force-writes: this node is not a master: %w", sdk.ErrNotSupported)
	}
	return m.forceWrites(ctx)
}

// Status implements sdk.StatusReporter.
func (n *Node) Status(ctx context.Context) ([]byte, error) {
	n.mu.Lock()
	role, m, s := n.role, n.m, n.s
	n.mu.Unlock()
	out := map[string]any{"role": role, "node_id": n.opts.NodeID, "ack_on": n.opts.AckOn,
		"wait_replicas": n.opts.WaitReplicas, "max_lag": n.opts.MaxLag}
	if m != nil {
		st := m.snapshot()
		out["addr"] = m.ln.Addr().String()
		out["acked_offset"] = st.AckedOffset
		out["in_sync"] = st.InSync
		out["fenced"] = st.Fenced
		if st.Fenced {
			out["reason"] = st.Reason
		}
		out["replicas"] = st.Replicas
		if r := m.refusals(); len(r) > 0 {
			out["refused"] = r
		}
	}
	if s != nil {
		out["master_addr"] = s.addr
		for k, v := range s.status() {
			out[k] = v
		}
	}
	return json.Marshal(out)
}

// logf forwards to the host's log (so external plugins' lines reach it)
// and to slog.
func (n *Node) logf(level slog.Level, msg string, kv ...any) {
	n.log.Log(context.Background(), level, msg, kv...)
}
