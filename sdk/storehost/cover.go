package storehost

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/sdk"
)

// Coverage is a requirement on the replicas that an acknowledgement must
// meet beyond the replicator's own rule (its AckedOffset): in cluster mode,
// "held by every member of the controller's SyncStateSet". The host judges
// it from the replicas' AckOffsets as the replicator reports them
// (sdk.ReplicationState.Replicas), never from a count alone.
//
// It is read live: an acknowledgement that is waiting sees every change
// (Host.SetCover) made after it started, so a replica that enters the requirement while acks
// are in flight must hold them too before they are released. A nil
// *Coverage, or the zero CoverRequirement, requires nothing. All methods
// are safe for concurrent use.
type Coverage struct {
	req atomic.Pointer[CoverRequirement]
}

// CoverRequirement is what a Coverage requires of a record's end offset.
type CoverRequirement struct {
	// IDs are replicas (sdk.ReplicaState.ID) that must each hold the
	// record: report Connected with an AckOffset at or past its end. One
	// that is not reported connected and in sync makes an ack refused at
	// once (SLAVE_NOT_AVAILABLE); one that falls behind while an ack waits
	// holds the ack back until it catches up or the timeout passes.
	IDs []string
	// AtLeast > 0: that many connected replicas, whichever they are, must
	// each hold the record, and as many must be in sync when the ack
	// starts.
	AtLeast int
}

// SetCover makes r c's requirement (r is copied) and, when it changed,
// checks every waiting acknowledgement again at once (a requirement that
// became easier to meet may release acks no report would release until
// the replicas' state next changes).
func (h *Host) SetCover(c *Coverage, r CoverRequirement) {
	if old := c.Requirement(); old.AtLeast == r.AtLeast && slices.Equal(old.IDs, r.IDs) && c.req.Load() != nil {
		return
	}
	r.IDs = slices.Clone(r.IDs)
	c.req.Store(&r)
	// As a report does: waiters on AckedOffset are released, and those
	// held back only by the coverage check it and wait again.
	h.replWait.Release(h.acked.Load())
}

// Requirement is the requirement in force (the zero value on a nil c or
// before the first Set).
func (c *Coverage) Requirement() CoverRequirement {
	if c == nil {
		return CoverRequirement{}
	}
	if r := c.req.Load(); r != nil {
		return *r
	}
	return CoverRequirement{}
}

// covers reports whether the policy's acks are subject to a Coverage: it
// has one, and it waits for replicas at all.
func (p AckPolicy) covers() bool { return p.Cover != nil && p.Replication.WaitReplicas > 0 }

// Covered is the offset below which every byte is acknowledged under p:
// the replicator's AckedOffset (ConfirmOffset), limited, when p has a
// Cover and waits for replicas, by the AckOffset of every replica the
// requirement names (0 for one not reported connected) and by the
// AtLeast-th highest AckOffset of the connected replicas (0 with fewer).
// It is what an ack under p waits for, and what consumers may see when
// the policy makes records visible only once replicated.
func (h *Host) Covered(p AckPolicy) int64 {
	if !p.covers() {
		return h.ConfirmOffset()
	}
	return h.coveredBy(p.Cover)
}

// coveredBy is Covered under c's requirement now.
func (h *Host) coveredBy(c *Coverage) int64 {
	off, _ := h.covered(c.Requirement())
	return off
}

// covered applies r to the last reported state: the covered offset, and
// whether an ack starting now must be refused (a named replica not
// connected and in sync, or fewer than AtLeast in sync).
func (h *Host) covered(r CoverRequirement) (off int64, refuse bool) {
	off = h.ConfirmOffset()
	h.mu.Lock()
	reps := h.state.Replicas
	var held []int64 // AckOffsets of the connected replicas
	inSync := 0
	if r.AtLeast > 0 {
		for _, rep := range reps {
			if rep.Connected {
				held = append(held, rep.AckOffset)
				if rep.InSync {
					inSync++
				}
			}
		}
	}
	for _, id := range r.IDs {
		rep, ok := findReplica(reps, id)
		if !ok || !rep.Connected {
			off, refuse = 0, true
			continue
		}
		off = min(off, rep.AckOffset)
		if !rep.InSync {
			refuse = true
		}
	}
	h.mu.Unlock()
	if r.AtLeast > 0 {
		if len(held) < r.AtLeast {
			return 0, true
		}
		slices.SortFunc(held, func(a, b int64) int { return cmp.Compare(b, a) }) // highest first
		off = min(off, held[r.AtLeast-1])
		refuse = refuse || inSync < r.AtLeast
	}
	return off, refuse
}

// findReplica is the replica reported under id.
func findReplica(reps []sdk.ReplicaState, id string) (sdk.ReplicaState, bool) {
	for _, r := range reps {
		if r.ID == id {
			return r, true
		}
	}
	return sdk.ReplicaState{}, false
}

// onCovered calls fn(true) once Covered under c reaches end, or fn(false)
// at deadline. fn runs exactly once, as OnReplicated's does. Every report
// that changes a replica's AckOffset also releases the AckedOffset
// waiters, and Covered never exceeds AckedOffset: so the wait is parked
// on AckedOffset and, when a report brings AckedOffset but not the
// coverage to end, parked again until the next report.
func (h *Host) onCovered(c *Coverage, end int64, deadline time.Time, fn func(ok bool)) {
	reached := func() bool { return h.coveredBy(c) >= end }
	h.replWait.Notify(end, max(time.Until(deadline), 0), reached, func(ok bool) {
		if ok || !time.Now().Before(deadline) {
			fn(ok)
			return
		}
		h.onCovered(c, end, deadline, fn)
	})
}
