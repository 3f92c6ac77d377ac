package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/sdk"
)

// Fence keys (a master is fenced while any key is set).
const (
	fenceStart   = "start"
	fenceCatchUp = "catch-up"
)

// maxPeers bounds concurrent HA connections a master serves.
const maxPeers = 64

// master is the master role: a listener, one goroutine pair per replica,
// the in-sync set and the fence.
type master struct {
	n    *Node
	host sdk.Host
	opts Options
	ln   net.Listener
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	peers     map[*peer]struct{}
	conns     map[*Conn]struct{} // every open connection, handshaking or streaming
	fences    map[string]string
	refused   map[string]string
	epochs    []sdk.Epoch // cached history (this node is its only writer)
	needEpoch bool        // fenced at start: begin an epoch when the fence lifts
	maxSeen   int32

	committed atomic.Int64
	timeline  timeline

	repMu sync.Mutex
	acked int64
	last  sdk.ReplicationState

	catchMu sync.Mutex
}

// peer is one connected replica.
type peer struct {
	id, addr  string
	conn      *Conn
	received  atomic.Int64
	flushed   atomic.Int64
	sent      atomic.Int64 // end of what was streamed
	contact   atomic.Int64 // unix nanos of the last frame received
	streaming atomic.Bool
	acked     chan struct{} // capacity 1: an acknowledgement arrived (wakes stream)
}

func newMaster(n *Node, ln net.Listener, hist []sdk.Epoch) *master {
	ctx, cancel := context.WithCancel(context.Background())
	m := &master{n: n, host: n.host, opts: n.opts, ln: ln, ctx: ctx, cancel: cancel,
		log:   n.log.With("role", "master", "addr", ln.Addr().String()),
		peers: map[*peer]struct{}{}, conns: map[*Conn]struct{}{}, fences: map[string]string{}, refused: map[string]string{},
		epochs: slices.Clone(hist), maxSeen: n.state.get().MaxEpoch}
	if len(hist) > 0 {
		m.maxSeen = max(m.maxSeen, hist[len(hist)-1].Epoch)
	}
	if pos, err := n.host.Positions(ctx); err == nil {
		m.committed.Store(pos.Committed)
		m.timeline.record(pos.Committed, time.Now())
	}
	return m
}

func (m *master) start() {
	m.wg.Add(2)
	go m.acceptLoop()
	go m.tickLoop()
}

// stop closes the listener and every replica connection and waits for
// the goroutines.
func (m *master) stop() {
	m.cancel()
	m.ln.Close()
	m.closePeers(nil)
	m.wg.Wait()
}

// closePeers closes every connection but except's; replicas see EOF and
// re-handshake.
func (m *master) closePeers(except *Conn) {
	m.mu.Lock()
	for c := range m.conns {
		if c != except {
			c.Close()
		}
	}
	m.mu.Unlock()
}

func (m *master) acceptLoop() {
	defer m.wg.Done()
	var handshakes sync.WaitGroup
	defer handshakes.Wait()
	conns := make(chan struct{}, maxPeers)
	for {
		nc, err := m.ln.Accept()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			m.log.Warn("HA accept failed", "err", err)
			select {
			case <-time.After(50 * time.Millisecond):
				continue
			case <-m.ctx.Done():
				return
			}
		}
		select {
		case conns <- struct{}{}:
		default:
			m.log.Warn("HA connection refused: too many replicas", "remote", nc.RemoteAddr().String(), "max", maxPeers)
			nc.Close()
			continue
		}
		handshakes.Add(1)
		go func() {
			defer handshakes.Done()
			defer func() { <-conns }()
			m.handle(nc)
		}()
	}
}

// tickLoop refreshes the committed offset, samples it for lag in seconds,
// and re-reports the in-sync set.
func (m *master) tickLoop() {
	defer m.wg.Done()
	t := time.NewTicker(min(100*time.Millisecond, m.opts.HeartbeatInterval))
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			if pos, err := m.host.Positions(m.ctx); err == nil {
				m.observe(pos.Committed)
			}
			m.report(m.ctx, false)
		}
	}
}

// observe records a committed offset the master has seen.
func (m *master) observe(c int64) {
	for {
		cur := m.committed.Load()
		if c <= cur {
			return
		}
		if m.committed.CompareAndSwap(cur, c) {
			m.timeline.record(c, time.Now())
			return
		}
	}
}

func (m *master) setFence(key, reason string) {
	m.mu.Lock()
	m.fences[key] = reason
	m.mu.Unlock()
	m.log.Warn("replication master fenced: refusing writes", "key", key, "reason", reason)
}

func (m *master) clearFence(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.fences[key]
	delete(m.fences, key)
	return ok
}

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

// catchUp pulls [d.From, d.To) from the replica into this master's log,
// fenced meanwhile, then adopts d.History and begins a new epoch. catchMu
// is held.
func (m *master) catchUp(p *peer, d Decision, log *slog.Logger) error {
	m.setFence(fenceCatchUp, d.Reason)
	m.report(m.ctx, true)
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
	m.closePeers(p.conn) // others planned against the old history: re-handshake
	m.report(m.ctx, true)
	return nil
}

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

// timeline remembers when the committed offset reached which value, to
// turn a replica's byte lag into seconds: the age of the oldest record it
// has not acknowledged.
type timeline struct {
	mu      sync.Mutex
	offs    []int64
	times   []time.Time
	lastRec time.Time
}

const timelineMax = 4096

func (t *timeline) record(off int64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.offs); n > 0 && (off <= t.offs[n-1] || now.Sub(t.lastRec) < time.Millisecond) {
		if off > t.offs[n-1] && now.Sub(t.lastRec) < time.Millisecond {
			t.offs[n-1] = off // coalesce bursts; keeps the older time (conservative)
		}
		return
	}
	if len(t.offs) >= timelineMax {
		t.offs = append(t.offs[:0], t.offs[timelineMax/2:]...)
		t.times = append(t.times[:0], t.times[timelineMax/2:]...)
	}
	t.offs = append(t.offs, off)
	t.times = append(t.times, now)
	t.lastRec = now
}

// lagSeconds is how long ago the first byte beyond ack was committed (0
// when the replica has everything).
func (t *timeline) lagSeconds(ack, committed int64, now time.Time) float64 {
	if ack >= committed {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// The first sample whose offset is beyond ack was taken at or after
	// the moment the byte at ack was committed; the one before it, before.
	i := sort.Search(len(t.offs), func(i int) bool { return t.offs[i] > ack })
	switch {
	case i == len(t.offs):
		return 0
	case i == 0:
		return now.Sub(t.times[0]).Seconds()
	}
	return now.Sub(t.times[i-1]).Seconds()
}
