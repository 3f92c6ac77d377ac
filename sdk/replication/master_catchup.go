package replication

import (
	"fmt"
	"log/slog"
	"slices"
)

// catchUp pulls [d.From, d.To) from the replica into this master's log
// (which ended at end when d was decided), fenced meanwhile, then adopts d.History and begins a new epoch. catchMu
// is held.
//
// Every other connection is closed before the first pulled byte is
// appended, and none can be admitted until catchMu is released: a replica
// streaming meanwhile would receive the pulled bytes labelled with the
// history this catch-up replaces (the takeover epoch the master began at
// d.From, say), record that epoch for them, and on its next handshake
// appear to hold a divergent tail of its own in an epoch the master no
// longer has, which fences the master for good. Those replicas re-handshake
// against the adopted history.
//
// On failure the catch-up fence becomes this replica's fence (its key,
// p.fenceKey()): the master keeps refusing writes, it may hold part of
// the replica's bytes, until a later handshake of the same replica
// streams or catches up (or ForceWrites). A write that reached the log
// between the decision and the fence fails the catch-up the same way;
// the replica's next handshake then decides on the log as it is.
func (m *master) catchUp(p *peer, d Decision, end int64, log *slog.Logger) (err error) {
	m.setFence(fenceCatchUp, d.Reason)
	defer func() {
		if err != nil {
			m.setFence(p.fenceKey(), "catch-up from replica "+p.id+" failed: "+err.Error())
			m.clearFence(fenceCatchUp)
		}
	}()
	m.closePeers(p.conn)
	m.report(m.ctx, true)
	if pos, err := m.host.Positions(m.ctx); err != nil {
		return fmt.Errorf("read positions before catch-up: %w", err)
	} else if pos.Committed != end {
		return fmt.Errorf("the log moved from %d to %d after the decision to catch up", end, pos.Committed)
	}
	c := p.conn
	if err := c.WriteFrame(true, FramePull, Pull{From: d.From, To: d.To}.Marshal()); err != nil {
		return err
	}
	off := d.From
	for off < d.To {
		f, err := c.ExpectFrame(FrameData)
		if err != nil {
			return fmt.Errorf("read pulled data at %d: %w", off, err)
		}
		h, data, err := DecodeData(f.Payload)
		if err != nil {
			return err
		}
		if h.Offset != off || len(data) == 0 || off+int64(len(data)) > d.To {
			return fmt.Errorf("%w: replica sent %d bytes at %d, expected data at %d below %d", ErrBadFrame, len(data), h.Offset, off, d.To)
		}
		if err := m.host.AppendLog(m.ctx, off, data); err != nil {
			return fmt.Errorf("append pulled data at %d: %w", off, err)
		}
		off += int64(len(data))
		m.n.met.bytesPulled.Add(len(data))
		m.observe(off)
	}
	// The replica's metadata follows its log: consumer and delay offsets
	// merge by maximum, so no consumer is reset by this master's loss.
	mf, err := c.ExpectFrame(FrameMeta)
	if err != nil {
		return fmt.Errorf("read the replica's metadata after catch-up: %w", err)
	}
	if err := m.host.MetaApply(m.ctx, mf.Payload); err != nil {
		return fmt.Errorf("merge the replica's metadata: %w", err)
	}
	if err := m.host.SetEpochs(m.ctx, d.History); err != nil {
		return fmt.Errorf("adopt the replica's epoch history: %w", err)
	}
	m.mu.Lock()
	m.epochs = slices.Clone(d.History)
	m.mu.Unlock()
	if _, err := m.beginEpoch(m.ctx, false); err != nil {
		return err
	}
	m.clearFence(fenceCatchUp)
	log.Warn("replication master caught up from a replica that was ahead of it", "from", d.From, "to", d.To)
	m.report(m.ctx, true)
	return nil
}
