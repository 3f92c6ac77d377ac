package replication

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/keelmq/keel/sdk"
)

// snapshot computes the replication state without reporting it.
func (m *master) snapshot() sdk.ReplicationState {
	m.repMu.Lock()
	defer m.repMu.Unlock()
	return m.computeLocked(time.Now())
}

// computeLocked builds the state; repMu held.
func (m *master) computeLocked(now time.Time) sdk.ReplicationState {
	committed := m.committed.Load()
	m.mu.Lock()
	peers := make([]*peer, 0, len(m.peers))
	for _, p := range m.peers {
		peers = append(peers, p)
	}
	fenced := len(m.fences) > 0
	var reasons []string
	for _, k := range slices.Sorted(mapsKeys(m.fences)) {
		reasons = append(reasons, m.fences[k])
	}
	m.mu.Unlock()
	sort.Slice(peers, func(i, j int) bool {
		if peers[i].id != peers[j].id {
			return peers[i].id < peers[j].id
		}
		return peers[i].addr < peers[j].addr
	})
	flushedKnown := m.opts.AckOn == AckFlushed
	reps := make([]sdk.ReplicaState, 0, len(peers))
	rs := make([]Replica, 0, len(peers))
	var top int64 // the highest acknowledgement: no verdict goes beyond it
	for _, p := range peers {
		if !p.streaming.Load() {
			continue
		}
		r := Replica{ID: p.id, Addr: p.addr, Received: p.received.Load(), FlushedKnown: flushedKnown}
		r.Acked = r.Received
		if flushedKnown {
			r.Flushed = p.flushed.Load()
			r.Acked = r.Flushed
		}
		lag := max(0, committed-r.Acked)
		lagSec := m.timeline.lagSeconds(r.Acked, committed, now)
		r.InSync = lag <= m.opts.MaxLag && lagSec <= m.opts.MaxLagTime.Seconds()
		r.Epoch = m.epochOfAck(r.Acked)
		rs = append(rs, r)
		top = max(top, r.Acked)
		reps = append(reps, sdk.ReplicaState{ID: p.id, Addr: p.addr, AckOffset: r.Acked, LagBytes: lag,
			LagSeconds: lagSec, InSync: r.InSync, Connected: true,
			LastContact: time.Unix(0, p.contact.Load())})
	}
	v := m.opts.Policy.Acknowledge(committed, rs)
	m.acked = max(m.acked, min(v.Acked, top))
	return sdk.ReplicationState{AckedOffset: m.acked, InSync: v.InSync, Fenced: fenced, Reason: strings.Join(reasons, "; "), Replicas: reps}
}

// report sends the state to the host when it changed (always with force).
func (m *master) report(ctx context.Context, force bool) {
	m.repMu.Lock()
	defer m.repMu.Unlock()
	st := m.computeLocked(time.Now())
	if !force && sameState(st, m.last) {
		return
	}
	if err := m.host.ReportReplication(ctx, st); err != nil {
		if ctx.Err() == nil {
			m.log.Warn("HA: report replication state", "err", err)
		}
		return
	}
	m.last = st
}

// epochOfAck is the epoch of the master's history that holds the byte
// before ack (the first epoch when ack is 0).
func (m *master) epochOfAck(ack int64) int32 {
	e, _ := m.epochAt(max(0, ack-1))
	return e.Epoch
}

// sameState compares what matters to the host (not lag in seconds or
// contact times, which change constantly).
func sameState(a, b sdk.ReplicationState) bool {
	if a.AckedOffset != b.AckedOffset || a.InSync != b.InSync || a.Fenced != b.Fenced || a.Reason != b.Reason || len(a.Replicas) != len(b.Replicas) {
		return false
	}
	for i := range a.Replicas {
		x, y := a.Replicas[i], b.Replicas[i]
		if x.ID != y.ID || x.AckOffset != y.AckOffset || x.InSync != y.InSync || x.LagBytes != y.LagBytes {
			return false
		}
	}
	return true
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
