package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/sdk/storehost"
)

// Cluster mode (controller.addrs set): the controller decides whether this
// broker is its group's master, and elects another when the master dies.
// The broker registers with the controllers and heartbeats to the leader
// (controller.Agent), starts in the role the controller gives it, switches
// roles when an election changes it (clusterMember.apply), proposes its
// SyncStateSet as replicas come in sync or fall behind, and as master
// refuses writes once it cannot show the controller it is alive
// (clusterMember.leased): the lease rule.
//
// Timing. The broker heartbeats every clusterHeartbeatInterval and tells
// the controller to count it dead after controller.heartbeat_timeout (T)
// of silence; a master refuses writes once its last answered heartbeat
// was sent more than controller.Lease(T) = 2T/3 ago, or its connection to
// the leader closed. The leader counts a master dead T after its last
// heartbeat, or controller.ClosedMasterDead(T) = 5T/6 after it when its
// connection closed; so a master that is cut off stops taking writes at
// least T/6 before another can be elected.

// clusterHeartbeatInterval is how often a broker heartbeats.
const clusterHeartbeatInterval = 500 * time.Millisecond

// clusterMember is this broker's membership of its controller group.
type clusterMember struct {
	n      *Node
	client *controller.Client
	agent  *controller.Agent
	key    controller.GroupKey
	lease  time.Duration

	cancel context.CancelFunc
	done   sync.WaitGroup
	// changes carries the group states OnChange saw, newest wins; the
	// applier goroutine acts on them in order.
	changes chan struct{}

	mu       sync.Mutex
	serving  bool // the node serves: apply role changes (before: startup decides)
	stopping bool // stop was called
	// altered is the SyncStateSet this master's last accepted proposal
	// committed (newer than the agent's view until the next heartbeat).
	altered struct {
		set         []int64
		epoch       int32
		masterEpoch int32
	}
	// pending are this master's proposals that may still commit (sets).
	pending  []pendingSet
	leasedOK bool // the last lease verdict the write gate saw
	// cover is what acks must cover while this broker is master
	// (gateFewer); the ack policy in force points to it.
	cover *storehost.Coverage
}

// joinCluster registers with the controllers and waits (until ctx ends)
// until the group has a master, then sets the node's starting role: master
// if the controller chose this broker, else slave of the master's HA
// address. It runs before the plugins load.
func (n *Node) joinCluster(ctx context.Context) error {
	p := n.prof
	nodeID, err := loadNodeID(p.Store.Dir)
	if err != nil {
		return fmt.Errorf("cluster mode: %w", err)
	}
	client, err := controller.NewClient(p.Controller.Addrs, 3*time.Second)
	if err != nil {
		return fmt.Errorf("cluster mode: %w", err)
	}
	c := &clusterMember{n: n, client: client, changes: make(chan struct{}, 1), cover: &storehost.Coverage{},
		key:   controller.GroupKey{Cluster: p.Server.Cluster, BrokerName: p.Server.BrokerName},
		lease: controller.Lease(p.Controller.HeartbeatTimeout.D())}
	c.agent, err = controller.NewAgent(controller.AgentConfig{
		Client: client,
		// Members are known by a node id kept in the data directory, so a
		// broker whose disk was wiped comes back as a new member, outside
		// the SyncStateSet: it can be elected only once it caught up.
		Registration: controller.Registration{Group: c.key, Addr: n.advertised(), HAAddr: p.Server.HAAddr, NodeID: nodeID},
		Interval:     clusterHeartbeatInterval,
		Timeout:      p.Controller.HeartbeatTimeout.D(),
		Position:     n.clusterPosition,
		OnChange:     c.onChange,
		Logger:       n.log,
	})
	if err != nil {
		client.Close()
		return fmt.Errorf("cluster mode: %w", err)
	}
	n.cluster = c
	actx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done.Add(1)
	go func() { defer c.done.Done(); c.agent.Run(actx) }()
	n.log.Info("cluster mode: waiting for the controller to name this group's master", "controllers", p.Controller.Addrs, "group", c.key.String())
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if id, g, ok := c.state(); ok && g.MasterID != 0 {
			if g.MasterID == id {
				n.role = roleMaster
			} else {
				m, _ := g.Master()
				n.role, n.peer = roleSlave, m.HAAddr
			}
			n.setSlave(n.role == roleSlave)
			n.log.Info("cluster mode: role from the controller", "broker_id", id, "role", n.role, "master_id", g.MasterID, "master_epoch", g.MasterEpoch, "master_ha", n.peer)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster mode: no master named for %s by the controllers %v: %w", c.key, p.Controller.Addrs, ctx.Err())
		case <-t.C:
		}
	}
}

// clusterPosition is what a heartbeat reports: the last epoch of the epoch
// history, the log end and the confirmed offset (zeros before the store
// opens).
func (n *Node) clusterPosition() (int32, int64, int64) {
	if n.store == nil {
		return 0, 0, 0
	}
	var ep int32
	if e, ok := n.store.Epochs().Last(); ok {
		ep = e.Epoch
	}
	pos := n.store.Positions()
	return ep, pos.Committed, pos.Confirm
}

// state is this broker's id and its group as the controller last answered
// (members included, which change without an OnChange).
func (c *clusterMember) state() (int64, controller.Group, bool) {
	g, ok := c.agent.Group()
	return c.agent.BrokerID(), g, ok
}

// onChange wakes the applier: the group's master, epoch or SyncStateSet
// changed.
func (c *clusterMember) onChange(int64, controller.Group) {
	select {
	case c.changes <- struct{}{}:
	default:
	}
}

// serve starts acting on role changes, proposing SyncStateSets and
// keeping the lease; the node serves now. Writes are refused until the
// acknowledgement rule for this group's SyncStateSet is in force.
func (c *clusterMember) serve() {
	c.gateFewer()
	c.mu.Lock()
	c.serving = true
	c.leasedOK = true
	c.mu.Unlock()
	c.n.gate.update(c.n)
	ctx, cancel := context.WithCancel(context.Background())
	prev := c.cancel
	c.cancel = func() { cancel(); prev() }
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.changes:
				c.apply(ctx)
			case <-t.C:
				c.checkLease()
				c.proposeSyncStateSet(ctx)
				c.gateFewer()
			}
		}
	}()
	select { // the state seen during startup may have moved on
	case c.changes <- struct{}{}:
	default:
	}
}

// apply switches this broker's role to what the controller says.
func (c *clusterMember) apply(ctx context.Context) {
	n := c.n
	id, g, ok := c.state()
	if !ok {
		return
	}
	switch {
	case g.MasterID == id && n.slave.Load():
		n.log.Warn("cluster mode: the controller elected this broker master", "broker_id", id, "master_epoch", g.MasterEpoch)
		if _, err := n.promote(ctx); err != nil {
			n.log.Error("cluster mode: promotion failed", "err", err)
			return
		}
		c.gateFewer() // promote installed the replicator's own policy
	case g.MasterID != 0 && g.MasterID != id:
		m, _ := g.Master()
		if !n.slave.Load() || n.peerAddr() != m.HAAddr {
			n.log.Warn("cluster mode: following the master the controller names", "broker_id", id, "master_id", g.MasterID, "master_epoch", g.MasterEpoch, "master_ha", m.HAAddr)
			if err := n.follow(ctx, m.HAAddr); err != nil {
				n.log.Error("cluster mode: could not follow the new master", "err", err)
				return
			}
		}
	case g.MasterID == 0 && !n.slave.Load():
		// The controller cleared this group's master (it counted this
		// broker dead and had nobody to elect): stop taking writes.
		n.log.Error("cluster mode: the controller lists no master for this group; refusing writes", "broker_id", id)
		n.gate.update(n)
	}
	if n.registrar != nil {
		n.registrar.Trigger()
	}
}

// checkLease recomputes the write gate when the lease verdict changes.
func (c *clusterMember) checkLease() {
	ok := c.leased()
	c.mu.Lock()
	if c.stopping { // the agent's calls are being cancelled: no verdict
		c.mu.Unlock()
		return
	}
	changed := ok != c.leasedOK
	c.leasedOK = ok
	c.mu.Unlock()
	if changed {
		if !ok && !c.n.slave.Load() {
			c.n.log.Warn("cluster mode: no answer from the controller within the lease, or not its master any more; refusing writes", "lease", c.lease)
		}
		c.n.gate.update(c.n)
	}
}

// leased reports whether this master may take writes: the controller
// still counts it master, and heard from it within the lease.
func (c *clusterMember) leased() bool {
	id, g, ok := c.state()
	return ok && g.MasterID == id && c.agent.Leased(c.lease)
}

// refusalOrNone is refusal, "" for a node not in cluster mode (nil c).
func (c *clusterMember) refusalOrNone() string {
	if c == nil {
		return ""
	}
	return c.refusal()
}

// refusal is the cluster's reason for a master to refuse writes, or "".
func (c *clusterMember) refusal() string {
	c.mu.Lock()
	serving, ok := c.serving, c.leasedOK
	c.mu.Unlock()
	if !serving {
		return "starting: the controller's SyncStateSet rule for acknowledgements is not in force yet"
	}
	if id, g, known := c.state(); known && g.MasterID != id {
		return "the controller does not list this broker as its group's master"
	}
	if !ok {
		return fmt.Sprintf("no answer from the controller for longer than the lease (%v): another master may be elected", c.lease)
	}
	return ""
}

// proposeSyncStateSet asks the controller, as master, to make the
// SyncStateSet this master and the replicas its replication plugin counts
// in sync (memberReplicas maps them to members). A replica enters the set
// only once it is caught up (caughtUp); one in the set stays while it is
// in sync. The proposal counts for acks (gateFewer's maximal set) from
// before it is sent until the controller's set epoch passes it.
func (c *clusterMember) proposeSyncStateSet(ctx context.Context) {
	n := c.n
	id, g, ok := c.state()
	if !ok || g.MasterID != id || n.slave.Load() || n.host == nil {
		return
	}
	committed, epoch, _ := c.sets(g)
	ids := memberReplicas(g, id)
	want := []int64{id}
	for _, r := range n.host.Replication().Replicas {
		m := replicaMember(ids, r.ID)
		if m == 0 || !r.InSync || !r.Connected {
			continue
		}
		if slices.Contains(committed, m) || n.caughtUp(r) {
			want = append(want, m)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if slices.Equal(want, committed) {
		return
	}
	p := pendingSet{set: want, base: epoch, masterEpoch: g.MasterEpoch}
	c.mu.Lock()
	if !slices.ContainsFunc(c.pending, func(q pendingSet) bool {
		return q.base == p.base && q.masterEpoch == p.masterEpoch && slices.Equal(q.set, p.set)
	}) {
		c.pending = append(c.pending, p)
	}
	c.mu.Unlock()
	c.gateFewer() // acks must cover the proposed members before they can be elected
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ep, err := c.client.AlterSyncStateSet(cctx, c.key, id, g.MasterEpoch, want, epoch)
	if err != nil {
		n.log.Warn("cluster mode: proposing the SyncStateSet", "want", want, "have", committed, "err", err)
		return
	}
	c.mu.Lock()
	c.altered.set, c.altered.epoch, c.altered.masterEpoch = want, ep, g.MasterEpoch
	c.mu.Unlock()
	c.gateFewer()
	n.log.Info("cluster mode: SyncStateSet changed", "set", want, "epoch", ep)
}

// stop stops heartbeating and acting on changes.
func (c *clusterMember) stop() {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.cancel()
	c.done.Wait()
	c.client.Close()
}

// brokerID is the id the controller gave this broker (0 before it
// registered).
func (c *clusterMember) brokerID() int64 {
	id, _, _ := c.state()
	return id
}

// errClusterPromote refuses a manual promotion in cluster mode.
var errClusterPromote = errors.New("cluster mode: the controller decides which broker is master; ask it for a designated election (CONTROLLER_ELECT_MASTER) instead of promoting by hand")

// nodeIDFile holds a broker's stable identity for the controller, in its
// store directory: wiping the store gives the broker a new identity.
const nodeIDFile = "node_id"

// loadNodeID reads the broker's node id from dir, creating a random one
// on first use (written to a temporary file, synced and renamed).
func loadNodeID(dir string) (string, error) {
	path := filepath.Join(dir, nodeIDFile)
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read node id %s: %w", path, err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("new node id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", fmt.Errorf("write node id %s: %w", path, err)
	}
	_, werr := f.WriteString(id + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return "", fmt.Errorf("write node id %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write node id %s: %w", path, err)
	}
	return id, nil
}
