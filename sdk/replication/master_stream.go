package replication

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/keelmq/keel/sdk"
)

// serve streams to a replica after a Stream decision.
func (m *master) serve(p *peer, d Decision, log *slog.Logger) {
	c := p.conn
	m.mu.Lock()
	plan := Plan{From: d.From, AckFlushed: m.opts.AckOn == AckFlushed, MaxEpoch: m.maxSeen, Epochs: d.History,
		Takeovers: m.n.state.get().Takeovers}
	m.mu.Unlock()
	if err := c.WriteFrame(true, FramePlan, plan.Marshal()); err != nil {
		log.Warn("HA: send plan", "err", err)
		return
	}
	f, err := c.ExpectFrame(FrameAck)
	if err != nil {
		log.Warn("HA: first ack", "err", err)
		return
	}
	a, err := DecodeAck(f.Payload)
	if err != nil || a.Received != d.From || a.Flushed > a.Received {
		c.SendError(CodeProtocol, fmt.Sprintf("first ack must be %d", d.From))
		log.Warn("HA: bad first ack", "ack", a, "want", d.From, "err", err)
		return
	}
	p.received.Store(a.Received)
	p.flushed.Store(a.Flushed)
	p.sent.Store(d.From)
	p.contact.Store(time.Now().UnixNano())
	p.streaming.Store(true)
	c.SetIdle(m.opts.IdleTimeout)
	// The newest connection of a replica wins (see peer): the older one
	// stops counting in this step and is closed.
	m.mu.Lock()
	old := m.peers[p.key]
	m.peers[p.key] = p
	m.mu.Unlock()
	if old != nil {
		old.conn.Close()
		log.Info("HA replica reconnected: its previous connection is closed", "previous", old.addr)
	}
	defer func() {
		m.mu.Lock()
		if m.peers[p.key] == p { // not replaced by a newer connection
			delete(m.peers, p.key)
		}
		m.mu.Unlock()
		m.report(context.Background(), true)
	}()
	m.report(m.ctx, true)
	log.Info("HA replica streaming", "from", d.From)

	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		if err := m.readAcks(ctx, p); err != nil && ctx.Err() == nil {
			log.Warn("HA replica connection ended", "err", err)
		}
	}()
	if err := m.stream(ctx, p, d.From); err != nil && ctx.Err() == nil {
		log.Warn("HA streaming to replica ended", "err", err)
	}
	c.Close()
	<-done
}

// readAcks reads the replica's acknowledgements.
func (m *master) readAcks(ctx context.Context, p *peer) error {
	c := p.conn
	for {
		f, err := c.ReadFrame()
		if err != nil {
			return err
		}
		p.contact.Store(time.Now().UnixNano())
		switch f.Type {
		case FrameAck:
			a, err := DecodeAck(f.Payload)
			if err != nil {
				c.SendError(CodeProtocol, err.Error())
				return err
			}
			if a.Received > p.sent.Load() || a.Flushed > a.Received || a.Received < p.received.Load() {
				committed := m.committed.Load()
				if pos, perr := m.host.Positions(ctx); perr == nil {
					committed = pos.Committed
				}
				m.n.met.rejected.Inc()
				reason := fmt.Sprintf("ack %d (flushed %d) is beyond what this master sent (%d; committed %d) or went backwards from %d",
					a.Received, a.Flushed, p.sent.Load(), committed, p.received.Load())
				c.SendError(CodeLying, reason)
				return fmt.Errorf("replica acknowledgement rejected: %s", reason)
			}
			p.received.Store(a.Received)
			p.flushed.Store(a.Flushed)
			// Report first: the waiting producers are released before the
			// streamer runs, and the streamer, readied last, runs next on
			// this P and sends what they committed meanwhile.
			m.report(ctx, false)
			select {
			case p.acked <- struct{}{}:
			default:
			}
		case FrameError:
			em, _ := DecodeErrorMsg(f.Payload)
			return &PeerError{Code: em.Code, Reason: em.Reason}
		default:
			c.SendError(CodeProtocol, "unexpected "+f.Type.String())
			return fmt.Errorf("%w: unexpected %s from replica", ErrBadFrame, f.Type)
		}
	}
}

// epochAt returns the epoch holding offset off in the cached history and
// the start of the next epoch (-1 if none).
func (m *master) epochAt(off int64) (sdk.Epoch, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur sdk.Epoch
	next := int64(-1)
	for _, e := range m.epochs {
		if e.StartOffset <= off {
			cur = e
		} else {
			next = e.StartOffset
			break
		}
	}
	return cur, next
}
