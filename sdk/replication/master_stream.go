package replication

import (
	"bytes"
	"context"
	"errors"
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
	m.mu.Lock()
	m.peers[p] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.peers, p)
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

// stream sends committed log bytes from `from` on, heartbeats while idle,
// and metadata snapshots on their interval.
//
// Cadence. Committed bytes are sent as soon as the stream sees them,
// without timers, with one exception that makes every round trip carry
// everything pending: while part of what was sent is not yet
// acknowledged, a batch smaller than BatchSize/2 waits for the replica's
// next acknowledgement (which it sends as soon as its input drains), then
// goes out with whatever was committed meanwhile. That costs at most the
// round trip already in progress, and turns a stream of tiny frames (one
// per commit, each with its own acknowledgement and its own release of
// waiting producers) into one frame per round trip. Batches of at least
// BatchSize/2 (a replica catching up) never wait, and neither does
// anything once HeartbeatInterval has passed since the last write.
func (m *master) stream(ctx context.Context, p *peer, from int64) error {
	c := p.conn
	rd := newLogReader(m.host)
	next := from
	lastWrite := time.Now()
	var lastMeta time.Time
	var metaSent []byte
	half := int64(m.opts.BatchSize / 2)
	hb := make([]byte, 0, DataHeaderSize) // DATA headers, reused
	// bound is the context of every wait: it ends when the next heartbeat
	// or metadata snapshot is due. It is reused until it ends (the due
	// time only moves later), so a busy stream creates no timer per wait.
	var bound context.Context
	boundCancel := context.CancelFunc(func() {})
	defer func() { boundCancel() }()
	waitBound := func() context.Context {
		if bound == nil || bound.Err() != nil {
			boundCancel()
			due := lastWrite.Add(m.opts.HeartbeatInterval)
			if md := lastMeta.Add(m.opts.SyncMetaInterval); md.Before(due) {
				due = md
			}
			bound, boundCancel = context.WithDeadline(ctx, due)
		}
		return bound
	}
	for ctx.Err() == nil {
		if time.Since(lastMeta) >= m.opts.SyncMetaInterval {
			lastMeta = time.Now()
			snap, err := m.host.MetaSnapshot(ctx)
			switch {
			case err != nil:
				m.log.Warn("HA: metadata snapshot failed", "err", err)
			case len(snap) > m.opts.MaxFrameSize:
				m.log.Error("HA: metadata snapshot larger than max_frame_size: not synced", "bytes", len(snap), "max_frame_size", m.opts.MaxFrameSize)
			case !bytes.Equal(snap, metaSent):
				if err := c.WriteFrame(false, FrameMeta, snap); err != nil {
					return err
				}
				metaSent = snap
			}
		}
		committed := m.committed.Load()
		if next >= committed {
			if err := c.Flush(); err != nil {
				return err
			}
			if time.Since(lastWrite) < m.opts.HeartbeatInterval && time.Since(lastMeta) < m.opts.SyncMetaInterval {
				c2, err := m.host.WaitCommitted(waitBound(), next)
				if err == nil {
					m.observe(c2)
					continue
				}
				if ctx.Err() != nil {
					return nil
				}
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, sdk.ErrTimeout) {
					return fmt.Errorf("wait for the log to grow: %w", err)
				}
			}
			if time.Since(lastWrite) >= m.opts.HeartbeatInterval {
				if err := c.WriteFrame(true, FrameHeartbeat, Heartbeat{Committed: m.committed.Load()}.Marshal()); err != nil {
					return err
				}
				lastWrite = time.Now()
			}
			continue
		}
		if committed-next < half && p.sent.Load() > p.received.Load() && time.Since(lastWrite) < m.opts.HeartbeatInterval {
			// Caught up and a frame is in flight: let this one gather
			// what the next acknowledgement's round trip brings.
			if err := c.Flush(); err != nil {
				return err
			}
			select {
			case <-p.acked:
			case <-waitBound().Done():
			}
			// Learn what was committed meanwhile (no wait if it grew).
			if pos, err := m.host.Positions(ctx); err == nil {
				m.observe(pos.Committed)
			}
			continue
		}
		data, err := rd.read(ctx, next, m.opts.BatchSize)
		if err != nil {
			if errors.Is(err, sdk.ErrOffset) {
				c.SendError(CodeRefused, fmt.Sprintf("offset %d is no longer on this master (retention): reconnect", next))
			}
			return fmt.Errorf("read log at %d: %w", next, err)
		}
		if len(data) == 0 {
			if pos, err := m.host.Positions(ctx); err == nil && pos.Committed <= next {
				m.committed.Store(pos.Committed) // the log was cut back (cannot happen on a master)
			}
			continue
		}
		e, boundary := m.epochAt(next)
		if boundary > next && next+int64(len(data)) > boundary {
			data = data[:boundary-next] // never across an epoch boundary
		}
		hb = DataHeader{Offset: next, Epoch: e.Epoch, EpochStart: e.StartOffset, Committed: committed}.appendTo(hb[:0])
		p.sent.Store(next + int64(len(data)))
		// Small batches mean the replica is caught up: send now (sync acks
		// wait for it). Full batches are catch-up: let the buffer coalesce.
		flush := int64(len(data)) < half
		if err := c.WriteFrame(flush, FrameData, hb, data); err != nil {
			return err
		}
		next += int64(len(data))
		m.n.met.bytesSent.Add(len(data))
		lastWrite = time.Now()
	}
	return nil
}
