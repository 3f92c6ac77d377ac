package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// handle serves one replica connection.
func (m *master) handle(nc net.Conn) {
	c := NewConn(nc, m.opts.MaxFrameSize, m.opts.HandshakeTimeout)
	defer c.Close()
	m.mu.Lock()
	m.conns[c] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.conns, c)
		m.mu.Unlock()
	}()
	stopWatch := context.AfterFunc(m.ctx, func() { c.Close() })
	defer stopWatch()
	remote := nc.RemoteAddr().String()
	id, err := ServerAuth(c, m.n.cfg.Secret, m.opts.NodeID)
	if err != nil {
		if errors.Is(err, ErrAuth) {
			m.n.met.authFailures.Inc()
		}
		m.log.Warn("HA peer refused", "remote", remote, "err", err)
		return
	}
	if id == "" {
		id = remote
	}
	log := m.log.With("replica", id, "remote", remote)
	f, err := c.ExpectFrame(FrameState)
	if err != nil {
		log.Warn("HA handshake failed", "err", err)
		return
	}
	st, err := DecodeState(f.Payload)
	if err == nil {
		err = ValidateHistory(st.Epochs)
	}
	if err != nil {
		c.SendError(CodeProtocol, err.Error())
		log.Warn("HA handshake: bad state", "err", err)
		return
	}
	m.noteEpoch(st.MaxEpoch)
	if len(st.Epochs) > 0 {
		m.noteEpoch(st.Epochs[len(st.Epochs)-1].Epoch)
	}
	p := &peer{id: id, addr: remote, conn: c, acked: make(chan struct{}, 1)}
	fenceKey := "replica " + id
	slave := View{Min: st.Min, End: st.End, Epochs: st.Epochs, Takeovers: st.Takeovers}
	for attempt := 0; attempt < 4; attempt++ {
		// Decisions, fences, catch-ups and ForceWrites are serialised, so a
		// decision always sees the history the last of them left.
		m.catchMu.Lock()
		mv, err := m.view(m.ctx)
		if err != nil {
			m.catchMu.Unlock()
			c.SendError(CodeInternal, "master cannot read its log")
			log.Error("HA handshake: read positions", "err", err)
			return
		}
		d := Decide(mv, slave)
		log.Info("HA handshake", "decision", d.Action.String(), "from", d.From, "to", d.To, "reason", d.Reason,
			"master_log", fmt.Sprintf("[%d,%d)", mv.Min, mv.End), "replica_log", fmt.Sprintf("[%d,%d)", slave.Min, slave.End))
		switch d.Action {
		case Stream:
			m.mu.Lock()
			need := m.needEpoch
			delete(m.refused, id)
			m.mu.Unlock()
			if need {
				_, err := m.beginEpoch(m.ctx, false)
				m.catchMu.Unlock()
				if err != nil {
					log.Error("HA handshake: begin epoch", "err", err)
					c.SendError(CodeInternal, "master cannot begin its epoch")
					return
				}
				continue // decide again with the new epoch in the history
			}
			if m.clearFence(fenceKey) {
				log.Info("replication master: fence by this replica lifted")
			}
			m.catchMu.Unlock()
			m.report(m.ctx, true)
			m.serve(p, d, log)
			return
		case CatchUp:
			err := m.catchUp(p, d, log)
			if err == nil {
				m.clearFence(fenceKey)
			}
			m.catchMu.Unlock()
			if err != nil {
				log.Error("HA catch-up from replica failed: staying fenced", "err", err)
				c.SendError(CodeFenced, "catch-up failed: "+err.Error())
				return
			}
		case Fence:
			m.setFence(fenceKey, d.Reason)
			m.catchMu.Unlock()
			m.report(m.ctx, true)
			c.SendError(CodeFenced, d.Reason)
			return
		case Refuse:
			m.mu.Lock()
			m.refused[id] = d.Reason
			m.mu.Unlock()
			m.catchMu.Unlock()
			log.Warn("HA replica refused", "reason", d.Reason)
			c.SendError(CodeRefused, d.Reason)
			return
		}
	}
	c.SendError(CodeInternal, "handshake did not settle")
}
