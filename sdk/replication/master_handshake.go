package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
)

// handshakeAttempts bounds how often one handshake decides: a Stream
// decision that first has to begin the master's epoch decides again.
const handshakeAttempts = 4

// handle serves one replica connection: it authenticates the replica,
// reads its state, and settles what to do with it (stream to it, catch up
// from it, fence the master, or refuse it). The connection is closed when
// handle returns, and also as soon as the master stops.
func (m *master) handle(nc net.Conn) {
	c := NewConn(nc, m.opts.MaxFrameSize, m.opts.HandshakeTimeout)
	defer c.Close()
	defer m.track(c)()
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
	slave, ok := m.readReplicaState(c, log)
	if !ok {
		return
	}
	p := &peer{id: id, addr: remote, key: keyOf(id, remote), conn: c, acked: make(chan struct{}, 1)}
	for attempt := 0; attempt < handshakeAttempts; attempt++ {
		if m.settle(p, slave, log) {
			return
		}
	}
	c.SendError(CodeInternal, "handshake did not settle")
}

// track adds c to the open connections (which closePeers closes) and
// returns the function that removes it.
func (m *master) track(c *Conn) (untrack func()) {
	m.mu.Lock()
	m.conns[c] = struct{}{}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.conns, c)
		m.mu.Unlock()
	}
}

// readReplicaState reads the replica's STATE frame and validates its
// epoch history. On success the epochs it names are noted (so the
// master's next epoch is above them) and its log is returned as a View;
// on failure the replica is told why (if the frame arrived) and ok is
// false.
func (m *master) readReplicaState(c *Conn, log *slog.Logger) (slave View, ok bool) {
	f, err := c.ExpectFrame(FrameState)
	if err != nil {
		log.Warn("HA handshake failed", "err", err)
		return View{}, false
	}
	st, err := DecodeState(f.Payload)
	if err == nil {
		err = ValidateHistory(st.Epochs)
	}
	if err != nil {
		c.SendError(CodeProtocol, err.Error())
		log.Warn("HA handshake: bad state", "err", err)
		return View{}, false
	}
	m.noteEpoch(st.MaxEpoch)
	if len(st.Epochs) > 0 {
		m.noteEpoch(st.Epochs[len(st.Epochs)-1].Epoch)
	}
	return View{Min: st.Min, End: st.End, Epochs: st.Epochs, Takeovers: st.Takeovers}, true
}

// settle decides once what to do with replica p, whose log is slave, and
// acts on the decision. Decisions, fences, catch-ups and ForceWrites are
// serialised by catchMu, so a decision always sees the history the last
// of them left; catchMu is released before anything waits on the
// replica's stream. done is false when the handshake must decide again
// (an epoch was begun, or the master caught up from the replica); when
// done is true the handshake is over and the replica was told why if it
// is not streaming.
func (m *master) settle(p *peer, slave View, log *slog.Logger) (done bool) {
	m.catchMu.Lock()
	mv, err := m.view(m.ctx)
	if err != nil {
		m.catchMu.Unlock()
		p.conn.SendError(CodeInternal, "master cannot read its log")
		log.Error("HA handshake: read positions", "err", err)
		return true
	}
	d := Decide(mv, slave)
	log.Info("HA handshake", "decision", d.Action.String(), "from", d.From, "to", d.To, "reason", d.Reason,
		"master_log", fmt.Sprintf("[%d,%d)", mv.Min, mv.End), "replica_log", fmt.Sprintf("[%d,%d)", slave.Min, slave.End))
	switch d.Action {
	case Stream:
		return m.admit(p, d, log)
	case CatchUp:
		return m.catchUpFrom(p, d, mv.End, log)
	case Fence:
		m.fenceFor(p, d)
		return true
	case Refuse:
		m.refuse(p, d, log)
		return true
	}
	return false
}

// fenceKey is the fence key a replica's Fence decision sets.
func (p *peer) fenceKey() string { return "replica " + p.id }

// admit acts on a Stream decision; catchMu is held on entry and released
// by admit. The replica is no longer refused. If the master still owes
// the epoch it deferred while fenced at start, admit begins it and
// returns false, so the handshake decides again with the new epoch in
// the history (or, if it cannot begin it, tells the replica and returns
// true). Otherwise it lifts any fence this replica set, reports the
// state, and streams to the replica until the connection ends.
func (m *master) admit(p *peer, d Decision, log *slog.Logger) (done bool) {
	m.mu.Lock()
	need := m.needEpoch
	delete(m.refused, p.id)
	m.mu.Unlock()
	if need {
		_, err := m.beginEpoch(m.ctx, false)
		m.catchMu.Unlock()
		if err != nil {
			log.Error("HA handshake: begin epoch", "err", err)
			p.conn.SendError(CodeInternal, "master cannot begin its epoch")
			return true
		}
		return false
	}
	if m.clearFence(p.fenceKey()) {
		log.Info("replication master: fence by this replica lifted")
	}
	m.catchMu.Unlock()
	m.report(m.ctx, true)
	m.serve(p, d, log)
	return true
}

// catchUpFrom acts on a CatchUp decision; catchMu is held on entry and
// released by catchUpFrom. It pulls what the replica has beyond the
// master (see catchUp; end is the master's log end d was decided on); on
// success it lifts any fence this replica set and returns false (decide
// again, now level), on failure the master stays fenced under this
// replica's key, the replica is told why, and it returns true.
func (m *master) catchUpFrom(p *peer, d Decision, end int64, log *slog.Logger) (done bool) {
	err := m.catchUp(p, d, end, log)
	if err == nil {
		m.clearFence(p.fenceKey())
	}
	m.catchMu.Unlock()
	if err != nil {
		log.Error("HA catch-up from replica failed: staying fenced", "err", err)
		p.conn.SendError(CodeFenced, "catch-up failed: "+err.Error())
		return true
	}
	return false
}

// fenceFor acts on a Fence decision; catchMu is held on entry and
// released by fenceFor. The master is fenced under this replica's key
// until a later handshake of it streams or catches up; the state is
// reported and the replica told the reason.
func (m *master) fenceFor(p *peer, d Decision) {
	m.setFence(p.fenceKey(), d.Reason)
	m.catchMu.Unlock()
	m.report(m.ctx, true)
	p.conn.SendError(CodeFenced, d.Reason)
}

// refuse acts on a Refuse decision; catchMu is held on entry and released
// by refuse. The replica is recorded as refused (with the reason, until
// it is admitted) and told the reason.
func (m *master) refuse(p *peer, d Decision, log *slog.Logger) {
	m.mu.Lock()
	m.refused[p.id] = d.Reason
	m.mu.Unlock()
	m.catchMu.Unlock()
	log.Warn("HA replica refused", "reason", d.Reason)
	p.conn.SendError(CodeRefused, d.Reason)
}
