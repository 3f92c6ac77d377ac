package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Promote makes this slave the master (the replication plugin must
// implement sdk.Promoter).
func (n *Node) Promote(ctx context.Context) (int32, error) {
	if n.repl == nil {
		return 0, errors.New("no replication plugin is loaded")
	}
	pr, ok := n.repl.(sdk.Promoter)
	if !ok {
		return 0, fmt.Errorf("replication plugin cannot promote: %w", sdk.ErrNotSupported)
	}
	ep, err := pr.Promote(ctx)
	if err != nil {
		return 0, fmt.Errorf("promote: %w", err)
	}
	// Acks now follow the replicator's policy (a slave's was empty).
	n.setReplicationPolicy(n.repl.AckPolicy())
	n.setSlave(false)
	n.startMasterServices() // a master delivers the delayed, timer and transaction messages it holds
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
	p := storehost.NewAckPolicy(n.flushPolicy, r)
	n.mu.Lock()
	n.replPolicy = p.Replication
	n.mu.Unlock()
	n.ack.Store(&p)
}
