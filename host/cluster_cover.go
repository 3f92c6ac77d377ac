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
// The rule (Kafka's, for min_in_sync_replicas below wait_replicas), with
// S the replicas (besides the master) of the controller's committed
// SyncStateSet and M those of the "maximal" set: S together with every
// proposal of this master's that may still commit, so that a replica
// entering the set holds every ack released after it could be elected.
// Holding is judged by the AckOffset the replicator reports per replica.
//
//   - |S| >= wait_replicas: wait_replicas replicas must hold a record,
//     also while its ack waits (the replicator counting fewer does not
//     release it).
//   - min_in_sync_replicas <= |S| < wait_replicas, and every member of M
//     maps to a replica: acks proceed with fewer (AllowFewer), and a
//     record must be held by every replica of M. A replica outside S is
//     never counted for min_in_sync_replicas: only electable replicas
//     make an ack durable.
//   - otherwise (|S| < min_in_sync_replicas, or a member of M maps to no
//     replica): wait_replicas replicas must hold it, and every replica of
//     M that maps.

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
// wait_replicas): it grants AllowFewer or withholds it, and sets what
// acks must cover. It is called on every tick, before and after each
// proposal, after a promotion and before the node serves.
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
	granted, req := fewerRule(id, ok && g.MasterID == id, committed, maximal, memberReplicas(g, id), want)
	if !granted {
		want.AllowFewer, want.MinReplicas = false, 0
	}
	cur := n.ackPolicy()
	changed := cur.Replication.AllowFewer != want.AllowFewer || cur.Cover != c.cover
	// A grant's coverage is in force before the policy allows fewer (the
	// grant's conditions already hold, so it is safe for waiting acks
	// too); a withdrawal's policy before its coverage.
	if granted {
		n.host.SetCover(c.cover, req)
	}
	if changed {
		n.setAckPolicy(want, c.cover)
		n.log.Info("cluster mode: acks with fewer in-sync replicas", "allowed", want.AllowFewer,
			"sync_state_set", committed, "must_hold", req.IDs, "in_sync", n.host.InSync())
	}
	if !granted {
		n.host.SetCover(c.cover, req)
	}
}

// fewerRule is the rule above for broker self (master false: it is not
// the master in the group's state) whose committed set and maximal set
// are given, the other members mapped to replicas by replicas, under
// the replicator's policy p (AllowFewer set): whether acks may proceed
// with fewer replicas, and what they must cover. It changes with the
// controller's set, never with the in-sync count, so no ack slips
// through between a replica dropping out and the shrink's commit.
func fewerRule(self int64, master bool, committed, maximal []int64, replicas map[int64]string, p sdk.ReplicationPolicy) (bool, storehost.CoverRequirement) {
	var must []string // the replicas of the maximal set
	mapped := true
	for _, m := range maximal {
		if r, ok := replicas[m]; ok {
			must = append(must, r)
		} else if m != self {
			mapped = false
		}
	}
	inSet := len(committed) - 1 // besides the master
	req := storehost.CoverRequirement{AtLeast: p.WaitReplicas}
	switch {
	case !master || inSet >= p.WaitReplicas:
		return false, req
	case !mapped || inSet < p.MinReplicas:
		req.IDs = must
		return false, req
	}
	return true, storehost.CoverRequirement{IDs: must}
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
