package host

import (
	"slices"

	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Which replica is which controller member, and what an acknowledgement
// must cover in cluster mode.
//
// Identity. A replica names itself to the master by its node_id, which
// defaults to its HA address (leave replication.config.node_id at the
// default in cluster mode); a controller member is registered with its HA
// address. Of the members registered at one HA address, the newest (the
// highest id) is the one running there: an older one is that address
// before its disk was wiped. memberReplicas is the one home of this
// mapping; a member it cannot map (no HA address, or an older id at a
// reused address) has no replica that could show it holds anything.
//
// The rule (Kafka's, for min_in_sync_replicas below wait_replicas): a
// master acknowledges with fewer than wait_replicas replicas only while
// the controller's committed SyncStateSet has fewer replicas than
// wait_replicas, and then only records held by every replica of that set
// and of any proposal of this master's that may still commit (the
// "maximal" set, so a replica entering the set holds every ack released
// after it could be elected), judged by the AckOffset the replicator
// reports for each. Otherwise (a larger set, or a set member that cannot
// be mapped) acks need wait_replicas replicas, also while waiting: the
// replicator's own count with fewer does not release them.

// memberReplicas maps the members of g other than self to the replica
// identities (sdk.ReplicaState.ID) they stream under; members it cannot
// map are absent.
func memberReplicas(g controller.Group, self int64) map[int64]string {
	newest := make(map[string]int64) // HA address → newest member there
	for _, m := range g.Members {
		if m.ID != self && m.HAAddr != "" {
			newest[m.HAAddr] = max(newest[m.HAAddr], m.ID)
		}
	}
	out := make(map[int64]string, len(newest))
	for addr, id := range newest {
		out[id] = addr
	}
	return out
}

// replicaMember is the member that streams as replica id (0: none).
func replicaMember(ids map[int64]string, replica string) int64 {
	for m, r := range ids {
		if r == replica {
			return m
		}
	}
	return 0
}

// pendingSet is a SyncStateSet this master proposed on top of set epoch
// base (at master epoch masterEpoch): until the controller's set epoch
// passes base it may still commit, whatever its call returned.
type pendingSet struct {
	set         []int64
	base        int32
	masterEpoch int32
}

// sets is the group's committed SyncStateSet (the heartbeat's view, or
// this master's own accepted proposal when newer) with its epoch, and
// the maximal set: the committed one together with every proposal that
// may still commit on top of it. Proposals that can no longer commit are
// dropped. c.mu must not be held.
func (c *clusterMember) sets(g controller.Group) (committed []int64, epoch int32, maximal []int64) {
	committed, epoch = g.SyncStateSet, g.SyncStateSetEpoch
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.altered.epoch > epoch && c.altered.masterEpoch == g.MasterEpoch {
		committed, epoch = c.altered.set, c.altered.epoch
	}
	c.pending = slices.DeleteFunc(c.pending, func(p pendingSet) bool {
		return p.base < epoch || p.masterEpoch != g.MasterEpoch
	})
	maximal = slices.Clone(committed)
	for _, p := range c.pending {
		maximal = append(maximal, p.set...)
	}
	slices.Sort(maximal)
	return committed, epoch, slices.Compact(maximal)
}

// caughtUp reports whether replica r may enter the SyncStateSet: it is
// connected and in sync, and, when acks wait for replicas, it holds
// everything this master may have acknowledged (the replicator's
// AckedOffset, never beyond the log end): RocketMQ's expansion rule.
func (n *Node) caughtUp(r sdk.ReplicaState) bool {
	if !r.InSync || !r.Connected {
		return false
	}
	if n.replicationPolicy().WaitReplicas == 0 {
		return true
	}
	return r.AckOffset >= min(n.host.ConfirmOffset(), n.store.Positions().Committed)
}

// gateFewer applies the rule above to a replication policy that allows
// acks with fewer in-sync replicas (min_in_sync_replicas below
// wait_replicas): it grants AllowFewer, with the coverage of the maximal
// set, or withholds it and requires wait_replicas replicas. It is called
// on every tick, and before and after each proposal.
func (c *clusterMember) gateFewer() {
	n := c.n
	if n.slave.Load() || n.repl == nil || n.host == nil {
		return
	}
	want := n.repl.AckPolicy()
	if !want.AllowFewer || want.WaitReplicas == 0 {
		return
	}
	id, g, ok := c.state()
	committed, _, maximal := c.sets(g)
	ids := memberReplicas(g, id)
	req := storehost.CoverRequirement{}
	mapped := true
	for _, m := range maximal {
		if m == id {
			continue
		}
		r, found := ids[m]
		if !found {
			mapped = false
			break
		}
		req.IDs = append(req.IDs, r)
	}
	// Granted only once the committed set is smaller than an ack would
	// need: the replicas missing from it can no longer be elected. It
	// changes with the controller's set, never with the in-sync count.
	granted := ok && g.MasterID == id && mapped && len(committed)-1 < want.WaitReplicas
	if !granted {
		want.AllowFewer, want.MinReplicas = false, 0
		req = storehost.CoverRequirement{AtLeast: want.WaitReplicas}
	}
	cur := n.ackPolicy()
	changed := cur.Replication.AllowFewer != want.AllowFewer || cur.Cover != c.cover
	// Tighten first: the coverage before a grant, the policy before a
	// withdrawal; between the two steps an ack meets the stricter rule.
	if granted {
		c.cover.Set(req)
	}
	if changed {
		n.setAckPolicy(want, c.cover)
		n.log.Info("cluster mode: acks with fewer in-sync replicas", "allowed", want.AllowFewer,
			"sync_state_set", committed, "must_hold", req.IDs, "in_sync", n.host.InSync())
	}
	if !granted {
		c.cover.Set(req)
	}
}

// setAckPolicy is setReplicationPolicy with an acknowledgement coverage
// (nil: none).
func (n *Node) setAckPolicy(r sdk.ReplicationPolicy, cover *storehost.Coverage) {
	p := storehost.NewAckPolicy(n.flushPolicy, r)
	p.Cover = cover
	n.mu.Lock()
	n.replPolicy = p.Replication
	n.mu.Unlock()
	n.ack.Store(&p)
}
