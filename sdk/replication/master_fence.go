package replication

import (
	"context"
	"fmt"
	"slices"

	"github.com/keelmq/keel/sdk"
)

// setFence makes the master refuse writes for reason until key is cleared
// (the fence keys are in master.go).
func (m *master) setFence(key, reason string) {
	m.mu.Lock()
	m.fences[key] = reason
	m.mu.Unlock()
	m.log.Warn("replication master fenced: refusing writes", "key", key, "reason", reason)
}

// clearFence lifts key's fence; false when key was not set.
func (m *master) clearFence(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.fences[key]
	delete(m.fences, key)
	return ok
}

// refusals copies the replicas the handshake refused now, reason by
// replica id.
func (m *master) refusals() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.refused))
	for k, v := range m.refused {
		out[k] = v
	}
	return out
}

// noteEpoch raises the highest epoch seen.
func (m *master) noteEpoch(es ...int32) {
	m.mu.Lock()
	for _, e := range es {
		m.maxSeen = max(m.maxSeen, e)
	}
	m.mu.Unlock()
}

// beginEpoch appends a new epoch (greater than every epoch seen) at the
// committed offset; takeover records it as a takeover. It lifts the start
// fence.
func (m *master) beginEpoch(ctx context.Context, takeover bool) (int32, error) {
	pos, err := m.host.Positions(ctx)
	if err != nil {
		return 0, fmt.Errorf("replication: begin epoch: %w", err)
	}
	hist, err := m.host.Epochs(ctx)
	if err != nil {
		return 0, fmt.Errorf("replication: begin epoch: %w", err)
	}
	st := m.n.state.get()
	m.mu.Lock()
	e := max(m.maxSeen, st.MaxEpoch)
	if len(hist) > 0 {
		e = max(e, hist[len(hist)-1].Epoch)
	}
	e++
	m.mu.Unlock()
	start := pos.Committed
	if len(hist) == 0 {
		start = pos.Min // records written before any epoch belong to the first
	}
	next := append(slices.Clone(hist), sdk.Epoch{Epoch: e, StartOffset: start})
	if len(hist) > 0 && hist[len(hist)-1].StartOffset > pos.Committed {
		return 0, fmt.Errorf("replication: begin epoch %d at %d: history %v ends beyond the log", e, pos.Committed, hist)
	}
	if err := m.host.SetEpochs(ctx, next); err != nil {
		return 0, fmt.Errorf("replication: begin epoch %d at %d: %w", e, pos.Committed, err)
	}
	if err := m.n.state.update(func(s *NodeState) {
		s.MaxEpoch = max(s.MaxEpoch, e)
		if takeover {
			s.Takeovers = append(s.Takeovers, e)
		}
	}); err != nil {
		m.log.Error("replication: could not persist the new epoch in the node state", "epoch", e, "err", err)
	}
	m.mu.Lock()
	m.epochs, m.needEpoch, m.maxSeen = next, false, max(m.maxSeen, e)
	delete(m.fences, fenceStart)
	m.mu.Unlock()
	m.observe(pos.Committed)
	m.log.Info("replication: began epoch", "epoch", e, "offset", pos.Committed, "takeover", takeover)
	return e, nil
}

// forceWrites lifts every fence with a takeover epoch.
func (m *master) forceWrites(ctx context.Context) error {
	m.closePeers(nil) // abort a catch-up in progress; replicas re-handshake
	m.catchMu.Lock()
	defer m.catchMu.Unlock()
	m.mu.Lock()
	reasons := m.fences
	m.fences = map[string]string{}
	m.mu.Unlock()
	e, err := m.beginEpoch(ctx, true)
	if err != nil {
		m.mu.Lock()
		for k, v := range reasons {
			m.fences[k] = v
		}
		m.mu.Unlock()
		return err
	}
	m.log.Warn("replication: writes forced by an operator: replicas' data beyond this log will be truncated", "epoch", e, "lifted", reasons)
	m.report(ctx, true)
	return nil
}

// view is the master's log for Decide.
func (m *master) view(ctx context.Context) (View, error) {
	pos, err := m.host.Positions(ctx)
	if err != nil {
		return View{}, err
	}
	m.observe(pos.Committed)
	m.mu.Lock()
	es := slices.Clone(m.epochs)
	m.mu.Unlock()
	return View{Min: pos.Min, End: pos.Committed, Epochs: es, Takeovers: m.n.state.get().Takeovers}, nil
}
