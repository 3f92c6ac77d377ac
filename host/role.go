package host

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Promote makes this slave the master (the replication plugin must
// implement sdk.Promoter).
func (n *Node) Promote(ctx context.Context) (int32, error) {
	if n.cluster != nil {
		return 0, errClusterPromote
	}
	return n.promote(ctx)
}

// promote makes this slave the master (Promote, or the controller's
// election in cluster mode).
func (n *Node) promote(ctx context.Context) (int32, error) {
	if n.repl == nil {
		return 0, errors.New("no replication plugin is loaded")
	}
	pr, ok := n.repl.(sdk.Promoter)
	if !ok {
		return 0, fmt.Errorf("replication plugin cannot promote: %w", sdk.ErrNotSupported)
	}
	n.confirmFloor.Store(n.store.Positions().Committed) // all it holds came from the old master
	ep, err := pr.Promote(ctx)
	if err != nil {
		return 0, fmt.Errorf("promote: %w", err)
	}
	// Acks now follow the replicator's policy (a slave's was empty).
	n.setReplicationPolicy(n.repl.AckPolicy())
	n.setSlave(false)
	// A master delivers the delayed, timer and transaction messages it
	// holds. The promotion has happened: a service that cannot start is
	// reported, not undone.
	if err := n.startMasterServices(); err != nil {
		n.log.Error("promoted, but not every master service runs", "err", err)
	}
	n.log.Warn("promoted to master", "epoch", ep)
	return ep, nil
}

// ForceWrites lifts a replication write fence.
func (n *Node) ForceWrites(ctx context.Context) error {
	if n.repl == nil {
		return errors.New("no replication plugin is loaded")
	}
	fw, ok := n.repl.(sdk.ForceWriter)
	if !ok {
		return fmt.Errorf("replication plugin cannot lift fences: %w", sdk.ErrNotSupported)
	}
	return fw.ForceWrites(ctx)
}

func (n *Node) currentRole() string {
	if n.slave.Load() {
		return roleSlave
	}
	return roleMaster
}

// replicationPolicy is the replication half of the ack policy in force
// (it changes on Promote).
func (n *Node) replicationPolicy() sdk.ReplicationPolicy { return n.ackPolicy().Replication }

// ackPolicy is the acknowledgement rule in force, read once per send.
func (n *Node) ackPolicy() storehost.AckPolicy {
	if p := n.ack.Load(); p != nil {
		return *p
	}
	return storehost.AckPolicy{}
}

// setReplicationPolicy makes sends follow the flush policy and r (default
// timeouts filled in by storehost.NewAckPolicy, the rule's one home).
func (n *Node) setReplicationPolicy(r sdk.ReplicationPolicy) {
	n.setAckPolicy(r, nil)
}

// follow makes this broker a slave of the master whose HA address is
// haAddr (cluster mode: the controller elected another master, or this
// one's master moved). Writes are refused from the first step; the master
// services stop; the replication plugin is stopped (an external one's
// process too) and a fresh instance is configured as a slave of haAddr and
// started on the same store, which then truncates any divergent tail and
// catches up through the plugin's handshake.
func (n *Node) follow(ctx context.Context, haAddr string) error {
	n.setSlave(true)
	n.store.NotifyConfirm() // a slave's consumers see all it holds
	n.stopMasterServices()
	old := n.plugin(sdk.KindReplication)
	if old == nil {
		return errors.New("no replication plugin is loaded")
	}
	if err := old.stop(ctx); err != nil {
		n.log.Warn("stopping the replication plugin to follow a new master", "err", err)
	}
	if sv := supervisorOf(old.p); sv != nil {
		sv.Stop(ctx)
	}
	n.mu.Lock()
	n.role, n.peer = roleSlave, haAddr
	n.mu.Unlock()
	s := n.pluginSections()[2] // replication
	lp, err := n.instantiate(ctx, s)
	if err != nil {
		return fmt.Errorf("follow %s: %w", haAddr, err)
	}
	lp.onState = func() { n.gate.update(n) }
	n.mu.Lock()
	n.plugins[slices.Index(n.plugins, old)] = lp
	n.mu.Unlock()
	cfg, err := n.pluginConfig(sdk.KindReplication)
	if err != nil {
		return err
	}
	lp.cfg = cfg
	if err := lp.p.Configure(ctx, cfg); err != nil {
		return fmt.Errorf("follow %s: configure %s plugin %s: %w", haAddr, lp.kind, lp.name, err)
	}
	if err := n.adopt(lp); err != nil {
		return err
	}
	n.setReplicationPolicy(sdk.ReplicationPolicy{}) // a slave acknowledges nothing itself
	if err := lp.p.Start(ctx, n.host); err != nil {
		lp.setState(stateDegraded, err.Error())
		return fmt.Errorf("follow %s: start %s plugin %s: %w", haAddr, lp.kind, lp.name, err)
	}
	lp.setState(stateRunning, "")
	n.log.Warn("now a slave", "master_ha", haAddr)
	return nil
}

// peerAddr is the master's HA address this slave follows.
func (n *Node) peerAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.peer
}
