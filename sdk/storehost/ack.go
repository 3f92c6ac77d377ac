package storehost

import (
	"time"

	"github.com/keelmq/keel/sdk"
)

// AckStatus is how an acknowledgement wait ended. Every status means the
// records are stored; the non-OK ones name the guarantee that was not
// confirmed in time. String gives RocketMQ's send status name.
type AckStatus int

const (
	// AckOK: every guarantee the policy requires holds (SEND_OK).
	AckOK AckStatus = iota
	// AckFlushDiskTimeout: the local flush did not complete within the
	// flush policy's timeout (FLUSH_DISK_TIMEOUT, code 10).
	AckFlushDiskTimeout
	// AckFlushSlaveTimeout: the required replicas did not confirm within
	// the replication policy's timeout (FLUSH_SLAVE_TIMEOUT, code 12).
	AckFlushSlaveTimeout
	// AckSlaveNotAvailable: fewer replicas were in sync than the policy
	// waits for, so nothing was waited for (SLAVE_NOT_AVAILABLE, code 11).
	AckSlaveNotAvailable
)

// String returns RocketMQ's name of the send status.
func (s AckStatus) String() string {
	switch s {
	case AckOK:
		return "SEND_OK"
	case AckFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case AckFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case AckSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return "AckStatus(?)"
}

// The timeouts an acknowledgement waits when a plugin's policy leaves them
// at 0: RocketMQ's syncFlushTimeout and slave timeout. This is their one
// home; plugins that choose their own report them in their policies.
const (
	DefaultFlushTimeout       = 5 * time.Second
	DefaultReplicationTimeout = 3 * time.Second
)

// AckPolicy is a profile's acknowledgement rule: what the flush strategy
// and the replicator each require before a producer's ack. Build it with
// NewAckPolicy, once per change of either policy.
type AckPolicy struct {
	Flush       sdk.FlushPolicy
	Replication sdk.ReplicationPolicy
	// Cover, when set and the replication policy waits for replicas,
	// adds the coverage rule (see Coverage) to every acknowledgement, read
	// live at each check. Nil: the replication policy alone.
	Cover *Coverage
}

// NewAckPolicy combines the two plugin policies, filling a zero timeout of
// a policy that waits with its default.
func NewAckPolicy(f sdk.FlushPolicy, r sdk.ReplicationPolicy) AckPolicy {
	if f.WaitFlush && f.Timeout <= 0 {
		f.Timeout = DefaultFlushTimeout
	}
	if r.WaitReplicas > 0 && r.Timeout <= 0 {
		r.Timeout = DefaultReplicationTimeout
	}
	if r.AllowFewer && (r.MinReplicas < 0 || r.MinReplicas >= r.WaitReplicas) {
		r.AllowFewer, r.MinReplicas = false, 0 // nothing fewer to allow
	}
	return AckPolicy{Flush: f, Replication: r}
}

// AckNow answers at once when the acknowledgement of the records ending at
// end (exclusive) needs no wait: the policy waits for nothing, what it
// waits for has happened, or too few replicas are in sync (the same
// checks, in the same order, as Ack). ok is false when Ack would wait.
func (h *Host) AckNow(p AckPolicy, end int64) (st AckStatus, ok bool) {
	wait, refuse := h.decide(p)
	switch {
	case refuse:
		return AckSlaveNotAvailable, true
	case p.Flush.WaitFlush && h.store.Positions().Flushed < end:
		return 0, false
	case wait && h.Covered(p) < end:
		return 0, false
	}
	return AckOK, true
}

// decide is the call-time half of the rule: whether an ack waits for
// replicas, or is refused at once: by the replication policy (replicas),
// or because the policy's Coverage cannot be met now (covered).
func (h *Host) decide(p AckPolicy) (wait, refuse bool) {
	wait, refuse = p.replicas(h.InSync())
	if !refuse && p.covers() {
		_, refuse = h.covered(p.Cover.Requirement())
	}
	return wait, refuse
}

// replicas applies the replication policy to inSync replicas in sync:
// whether an ack waits for the replicated offset, or is refused at once
// (SLAVE_NOT_AVAILABLE). With WaitReplicas in sync (or more) it waits;
// with fewer it is refused, unless AllowFewer and at least MinReplicas
// are in sync: then it waits for those, or, with none, for nothing.
func (p AckPolicy) replicas(inSync int) (wait, refuse bool) {
	r := p.Replication
	switch {
	case r.WaitReplicas == 0:
		return false, false
	case inSync >= r.WaitReplicas:
		return true, false
	case !r.AllowFewer || inSync < r.MinReplicas:
		return false, true
	}
	return inSync > 0, false
}

// Ack is the acknowledgement rule, the one the host's sends and the
// benchmark's producers both go by. For the records ending at end
// (exclusive), in this order:
//
//  1. if the replication policy waits for replicas and fewer than
//     WaitReplicas are in sync: AckSlaveNotAvailable, at once (unless
//     the policy AllowFewer and at least MinReplicas are: then step 3
//     waits for those, or with none for nothing); also at once when the
//     policy's Cover names a replica that is not reported connected and
//     in sync, or needs more such replicas than are (Coverage);
//  2. if the flush policy waits: the flushed offset must reach end within
//     Flush.Timeout, else AckFlushDiskTimeout;
//  3. if the replication policy waits (and a replica is in sync): the
//     replicated offset (Covered: the replicator's AckedOffset, limited
//     by the Cover's replicas as they are at each check) must reach end
//     within Replication.Timeout counted from the call (so the flush wait
//     uses part of it), else AckFlushSlaveTimeout;
//  4. AckOK.
//
// done is called exactly once: at once on the caller's goroutine when
// nothing needs waiting, otherwise on the flushing, replicating or timer
// goroutine that settles the wait, so it must be quick and must not block.
// No goroutine is parked per call.
func (h *Host) Ack(p AckPolicy, end int64, done func(AckStatus)) {
	start := time.Now()
	rp := p.Replication
	wait, refuse := h.decide(p)
	if refuse {
		done(AckSlaveNotAvailable)
		return
	}
	replicated := func() {
		if !wait {
			done(AckOK)
			return
		}
		settle := func(ok bool) {
			if ok {
				done(AckOK)
			} else {
				done(AckFlushSlaveTimeout)
			}
		}
		if p.covers() {
			h.onCovered(p.Cover, end, start.Add(rp.Timeout), settle)
			return
		}
		h.OnReplicated(end, max(rp.Timeout-time.Since(start), 0), settle)
	}
	if !p.Flush.WaitFlush {
		replicated()
		return
	}
	h.store.OnFlushed(end, p.Flush.Timeout, func(ok bool) {
		if !ok {
			done(AckFlushDiskTimeout)
			return
		}
		replicated()
	})
}
