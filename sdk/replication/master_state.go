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
	for p := range m.peers {
		peers = append(peers, p)
	}
	fenced := len(m.fences) > 0
	var reasons []string
	for _, k := range slices.Sorted(mapsKeys(m.fences)) {
		reasons = append(reasons, m.fences[k])
	}
	m.mu.Unlock()
	sort.Slice(peers, func(i, j int) bool { return peers[i].id < peers[j].id })
	var acks []int64
	reps := make([]sdk.ReplicaState, 0, len(peers))
	for _, p := range peers {
		if !p.streaming.Load() {
			continue
		}
		ack := p.received.Load()
		if m.opts.AckOn == AckFlushed {
			ack = p.flushed.Load()
		}
		lag := max(0, committed-ack)
		in := lag <= m.opts.MaxLag
		if in {
			acks = append(acks, ack)
		}
		reps = append(reps, sdk.ReplicaState{ID: p.id, Addr: p.addr, AckOffset: ack, LagBytes: lag,
			LagSeconds: m.timeline.lagSeconds(ack, committed, now), InSync: in, Connected: true,
			LastContact: time.Unix(0, p.contact.Load())})
	}
	sort.Slice(acks, func(i, j int) bool { return acks[i] > acks[j] })
	need := max(1, m.opts.WaitReplicas)
	if len(acks) >= need && acks[need-1] > m.acked {
		m.acked = acks[need-1]
	}
	return sdk.ReplicationState{AckedOffset: m.acked, InSync: len(acks), Fenced: fenced, Reason: strings.Join(reasons, "; "), Replicas: reps}
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
