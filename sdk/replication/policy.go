package replication

import (
	"cmp"
	"slices"
)

// Replica is one replica as a Policy sees it: a replica that finished
// its handshake and is streaming from this master.
type Replica struct {
	// ID is the identity the replica authenticated with: its node_id
	// (Options.NodeID), which defaults to its HA address. A zone-aware
	// or weighted policy keys its table on it.
	ID string
	// Addr is the replica's remote address as the master sees it.
	Addr string
	// Acked is what the replica acknowledged in the Node's sense: Received
	// with Options.AckOn = AckReceived, Flushed with AckFlushed. It never
	// exceeds what the master sent the replica, hence its committed offset
	// (a replica acknowledging more is disconnected). A replica that
	// reconnects starts again from where its handshake put it.
	Acked int64
	// Received is the end of what the replica appended to its log; it
	// never decreases while the replica stays connected.
	Received int64
	// Flushed is the end of what the replica flushed to its disk, when
	// FlushedKnown (replicas report it only with Options.AckOn =
	// AckFlushed); otherwise 0.
	Flushed      int64
	FlushedKnown bool
	// InSync: the replica is at most Options.MaxLag bytes behind the
	// master's committed offset, and its oldest unacknowledged byte was
	// committed at most Options.MaxLagTime ago.
	InSync bool
	// Epoch is the epoch of the master's history that holds the last byte
	// the replica acknowledged (the first epoch while Acked is 0).
	Epoch int32
}

// Verdict is a Policy's answer.
type Verdict struct {
	// Acked: every byte of the master's log below it is held by every
	// replica the policy counted (see Policy).
	Acked int64
	// InSync is the number of replicas the policy counts as in sync. The
	// host compares it with the ReplicationPolicy's WaitReplicas
	// (Options.WaitReplicas): while it is lower, producers that wait for
	// replicas get SLAVE_NOT_AVAILABLE at once instead of waiting out
	// their timeout. A policy that can acknowledge nothing new (a zone
	// without an in-sync replica, say) must report fewer than
	// WaitReplicas.
	InSync int
}

// Policy is the master's acknowledgement rule: given the replicas'
// states, how far the master's log is acknowledged, and how many replicas
// count as in sync. Options.Policy sets it; the default is InSyncReplicas
// with N = Options.WaitReplicas.
//
// Acknowledge is called by the master whenever it reports its state (on
// every acknowledgement that a replica sends, on every handshake, and on
// a tick of at most 100 ms), from whichever goroutine reports, but never
// concurrently: calls are serialised by the master's report lock, so an
// implementation needs no locking of its own for state that only
// Acknowledge touches. It must be quick, must not block, and must not
// call back into the Node. replicas is sorted by ID, holds only replicas
// that are streaming now (a disconnected replica is absent, not
// reported with InSync false), and belongs to the call: the policy must
// neither modify nor retain it. committed is the master's committed
// offset as the master last saw it.
//
// An implementation may assume that each replica's Acked bytes are at
// identical offsets in the master's log (the handshake truncated any
// divergent tail before the replica streamed), and nothing about the
// order or the number of calls.
//
// It must guarantee that Verdict.Acked is at most the Acked of every
// replica it counts towards that verdict: a byte is acknowledged only
// when every counted replica holds it. It need not be monotonic itself:
// the Node reports max(every Acked so far), so the reported AckedOffset
// never decreases while the master runs, and it never reports beyond the
// highest Acked of the replicas passed (a backstop, not a licence).
type Policy interface {
	Acknowledge(committed int64, replicas []Replica) Verdict
}

// InSyncReplicas is the default Policy: an offset is acknowledged
// once N in-sync replicas acknowledged it (the N-th highest Acked among
// them), and every in-sync replica counts towards Verdict.InSync. N below
// 1 counts as 1, so with WaitReplicas 0 (acks do not wait) the reported
// offset is the highest acknowledgement.
//
// With Fewer set, fewer than N in-sync replicas still acknowledge when at
// least Min of them (and one) are in sync: the offset every one of them
// acknowledged (Options.MinInSyncReplicas; the host then waits for it,
// sdk.ReplicationPolicy.AllowFewer).
type InSyncReplicas struct {
	N     int
	Fewer bool
	Min   int
}

// Acknowledge implements Policy.
func (p InSyncReplicas) Acknowledge(committed int64, replicas []Replica) Verdict {
	var acks []int64
	for _, r := range replicas {
		if r.InSync {
			acks = append(acks, r.Acked)
		}
	}
	v := Verdict{InSync: len(acks)}
	n := max(1, p.N)
	if p.Fewer && len(acks) < n && len(acks) >= max(1, p.Min) {
		n = len(acks)
	}
	if len(acks) >= n {
		slices.SortFunc(acks, func(a, b int64) int { return cmp.Compare(b, a) }) // highest first
		v.Acked = acks[n-1]
	}
	return v
}

// defaultPolicy is the policy of a Node whose Options.Policy is nil.
func defaultPolicy(o Options) Policy {
	return InSyncReplicas{N: o.WaitReplicas, Fewer: o.allowFewer(), Min: o.MinInSyncReplicas}
}
