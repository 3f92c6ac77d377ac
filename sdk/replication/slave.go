package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/keelmq/keel/sdk"
)

// slave is the slave role: a reconnecting client of the master.
type slave struct {
	n    *Node
	host sdk.Host
	opts Options
	addr string
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu              sync.Mutex
	connected       bool
	masterID        string
	end             int64
	masterCommitted int64
	lastErr         string
	sessions        int
}

func newSlave(n *Node, addr string) *slave {
	ctx, cancel := context.WithCancel(context.Background())
	return &slave{n: n, host: n.host, opts: n.opts, addr: addr, ctx: ctx, cancel: cancel,
		log: n.log.With("role", "slave", "master", addr)}
}

func (s *slave) start() {
	s.wg.Add(1)
	go s.run()
}

func (s *slave) stop() {
	s.cancel()
	s.wg.Wait()
}

func (s *slave) status() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{"connected": s.connected, "master_id": s.masterID, "received_offset": s.end,
		"master_committed": s.masterCommitted, "lag_bytes": max(0, s.masterCommitted-s.end),
		"last_error": s.lastErr, "sessions": s.sessions}
}

// run connects, follows the master, and reconnects with exponential
// backoff (with jitter) after any failure; a session that reached the
// streaming state resets the backoff.
func (s *slave) run() {
	defer s.wg.Done()
	backoff := s.opts.ReconnectBackoff
	for {
		streamed, err := s.session()
		if s.ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.connected = false
		if err != nil {
			s.lastErr = err.Error()
		}
		s.mu.Unlock()
		level := slog.LevelWarn
		if errors.Is(err, io.EOF) {
			level = slog.LevelInfo
		}
		s.log.Log(s.ctx, level, "HA session with master ended; reconnecting", "err", err, "backoff", backoff)
		if streamed {
			backoff = s.opts.ReconnectBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		s.n.met.reconnects.Inc()
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(wait):
		}
		if !streamed {
			backoff = min(2*backoff, s.opts.ReconnectBackoffMax)
		}
	}
}

// session runs one connection; streamed reports whether it got as far as
// receiving the log.
func (s *slave) session() (streamed bool, err error) {
	d := net.Dialer{Timeout: s.opts.HandshakeTimeout}
	nc, err := d.DialContext(s.ctx, "tcp", s.addr)
	if err != nil {
		return false, fmt.Errorf("dial master %s: %w", s.addr, err)
	}
	c := NewConn(nc, s.opts.MaxFrameSize, s.opts.HandshakeTimeout)
	defer c.Close()
	stopWatch := context.AfterFunc(s.ctx, func() { c.Close() })
	defer stopWatch()
	s.mu.Lock()
	s.sessions++
	s.mu.Unlock()

	mid, err := ClientAuth(c, s.n.cfg.Secret, s.opts.NodeID)
	if err != nil {
		if errors.Is(err, ErrAuth) {
			s.n.met.authFailures.Inc()
		}
		return false, err
	}
	log := s.log.With("master_id", mid)
	pos, err := s.host.Positions(s.ctx)
	if err != nil {
		return false, err
	}
	hist, err := s.host.Epochs(s.ctx)
	if err != nil {
		return false, err
	}
	ns := s.n.state.get()
	maxE := ns.MaxEpoch
	if len(hist) > 0 {
		maxE = max(maxE, hist[len(hist)-1].Epoch)
	}
	st := State{Min: pos.Min, End: pos.Committed, MaxEpoch: maxE, Epochs: hist, Takeovers: ns.Takeovers}
	if err := c.WriteFrame(true, FrameState, st.Marshal()); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.masterID, s.end = mid, pos.Committed
	s.mu.Unlock()

	ap := applier{s: s, c: c, hist: hist, end: pos.Committed, log: log}
	// Until the PLAN, frames are read here; once streaming, a reader
	// goroutine reads the next frame while this one applies the last.
	var rd *pipedReader
	defer func() {
		if rd != nil {
			rd.stop()
		}
	}()
	for {
		var f Frame
		var more bool // more input is already here: do not ack yet
		if rd == nil {
			if f, err = c.ReadFrame(); err != nil {
				return ap.streaming, err
			}
			more = c.Buffered() > 0
		} else {
			pf := <-rd.frames
			if pf.err != nil {
				return ap.streaming, pf.err
			}
			f, more = pf.f, pf.more || len(rd.frames) > 0
		}
		done, streamed, err := s.handle(c, &ap, f, log)
		if rd != nil {
			rd.release(f.Payload) // handle is done with it (applied or copied)
		}
		if done {
			return streamed, err
		}
		// Acknowledge when the input is drained (acks coalesce over
		// whatever arrived together), and often under a
		// continuous stream (every 250µs), so sync producers are not held back by a
		// replica that is never idle.
		if ap.streaming && ((!more && (ap.pending || time.Since(ap.lastAck) >= s.opts.HeartbeatInterval)) ||
			(ap.pending && time.Since(ap.lastAck) >= 250*time.Microsecond)) {
			if err := ap.ack(); err != nil {
				return true, err
			}
		}
		if ap.streaming && rd == nil {
			rd = startPipedReader(c)
		}
	}
}

// handle applies one frame; done reports that the session ends, with
// (streamed, err).
func (s *slave) handle(c *Conn, ap *applier, f Frame, log *slog.Logger) (done, streamed bool, err error) {
	{
		switch f.Type {
		case FramePull:
			if ap.streaming {
				return true, true, s.protocol(c, "PULL while streaming")
			}
			p, err := DecodePull(f.Payload)
			if err != nil {
				return true, false, s.protocol(c, err.Error())
			}
			if err := ap.servePull(p); err != nil {
				return true, false, err
			}
		case FramePlan:
			if ap.streaming {
				return true, true, s.protocol(c, "PLAN while streaming")
			}
			p, err := DecodePlan(f.Payload)
			if err == nil {
				err = ValidateHistory(p.Epochs)
			}
			if err != nil {
				return true, false, s.protocol(c, err.Error())
			}
			if err := ap.applyPlan(p); err != nil {
				c.SendError(CodeInternal, err.Error())
				return true, false, err
			}
			c.SetIdle(s.opts.IdleTimeout)
			s.mu.Lock()
			s.connected = true
			s.lastErr = ""
			s.mu.Unlock()
		case FrameData:
			if !ap.streaming {
				return true, false, s.protocol(c, "DATA before PLAN")
			}
			if err := ap.applyData(f.Payload); err != nil {
				return true, true, err
			}
		case FrameHeartbeat:
			h, err := DecodeHeartbeat(f.Payload)
			if err != nil {
				return true, ap.streaming, s.protocol(c, err.Error())
			}
			s.mu.Lock()
			s.masterCommitted = max(s.masterCommitted, h.Committed)
			s.mu.Unlock()
		case FrameMeta:
			if !ap.streaming {
				return true, false, s.protocol(c, "META before PLAN")
			}
			if err := s.host.MetaApply(s.ctx, f.Payload); err != nil {
				log.Warn("HA: applying the master's metadata failed", "err", err)
			}
		case FrameError:
			m, derr := DecodeErrorMsg(f.Payload)
			if derr != nil {
				return true, ap.streaming, derr
			}
			return true, ap.streaming, &PeerError{Code: m.Code, Reason: m.Reason}
		default:
			return true, ap.streaming, s.protocol(c, "unexpected "+f.Type.String())
		}
	}
	return false, false, nil
}

// pipedReader reads a streaming session's frames on its own goroutine into
// a few rotating buffers, so the next frame arrives while the session
// appends the last one.
type pipedReader struct {
	frames chan pipedFrame
	free   chan []byte
	done   chan struct{}
	exited chan struct{}
}

type pipedFrame struct {
	f    Frame
	more bool // the connection's read buffer held more bytes after f
	err  error
}

// pipedBuffers is how many frames can be read ahead plus the one applied.
const pipedBuffers = 3

func startPipedReader(c *Conn) *pipedReader {
	r := &pipedReader{frames: make(chan pipedFrame, pipedBuffers), free: make(chan []byte, pipedBuffers),
		done: make(chan struct{}), exited: make(chan struct{})}
	for range pipedBuffers {
		r.free <- nil
	}
	go func() {
		defer close(r.exited)
		for {
			var buf []byte
			select {
			case buf = <-r.free:
			case <-r.done:
				return
			}
			f, err := c.ReadFrameInto(buf)
			pf := pipedFrame{f: f, more: c.Buffered() > 0, err: err}
			select {
			case r.frames <- pf:
			case <-r.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// release gives a payload's buffer back for the next frames.
func (r *pipedReader) release(b []byte) {
	select {
	case r.free <- b[:0]:
	default: // cannot happen: as many buffers as slots
	}
}

// stop ends the reader; the caller closes the connection, which ends a
// read in progress.
func (r *pipedReader) stop() {
	close(r.done)
}

func (s *slave) protocol(c *Conn, what string) error {
	c.SendError(CodeProtocol, what)
	return fmt.Errorf("%w: from master: %s", ErrBadFrame, what)
}

// applier applies one session's frames to the slave's log.
type applier struct {
	s          *slave
	c          *Conn
	log        *slog.Logger
	hist       []sdk.Epoch
	end        int64
	ackFlushed bool
	streaming  bool
	pending    bool
	lastAck    time.Time
	ackBuf     []byte // ACK payloads, reused
}

// servePull sends the master the slave's [p.From, p.To).
func (a *applier) servePull(p Pull) error {
	s := a.s
	if p.To > a.end {
		a.c.SendError(CodeProtocol, fmt.Sprintf("pull beyond this replica's log end %d", a.end))
		return fmt.Errorf("master pulled [%d,%d) beyond this log's end %d", p.From, p.To, a.end)
	}
	a.log.Warn("HA: the master is behind this replica: sending it our log", "from", p.From, "to", p.To)
	rd := newLogReader(s.host)
	for off := p.From; off < p.To; {
		data, err := rd.read(s.ctx, off, s.opts.BatchSize)
		if err != nil {
			a.c.SendError(CodeInternal, err.Error())
			return fmt.Errorf("read log for the master at %d: %w", off, err)
		}
		if len(data) == 0 {
			return fmt.Errorf("read log for the master at %d: nothing", off)
		}
		if off+int64(len(data)) > p.To {
			data = data[:p.To-off]
		}
		if err := a.c.WriteFrame(false, FrameData, DataHeader{Offset: off, Committed: a.end}.Marshal(), data); err != nil {
			return err
		}
		off += int64(len(data))
	}
	// Then this replica's metadata: a master that lost its disk must get
	// back the consumer offsets (and groups, topics, delay offsets) along
	// with the log, or its consumers restart from 0 (ROCKETMQ-348).
	snap, err := s.host.MetaSnapshot(s.ctx)
	if err != nil {
		a.c.SendError(CodeInternal, err.Error())
		return fmt.Errorf("metadata snapshot for the master: %w", err)
	}
	if err := a.c.WriteFrame(false, FrameMeta, snap); err != nil {
		return err
	}
	return a.c.Flush()
}

// applyPlan truncates to the plan's offset and adopts its history.
func (a *applier) applyPlan(p Plan) error {
	s := a.s
	pos, err := s.host.Positions(s.ctx)
	if err != nil {
		return err
	}
	if p.From < pos.Committed {
		a.log.Warn("HA: cutting this log's divergent tail at the consistent point", "from", p.From, "to", pos.Committed)
		if err := s.host.TruncateLog(s.ctx, p.From); err != nil {
			return fmt.Errorf("truncate to the consistent point %d: %w", p.From, err)
		}
		s.n.met.truncations.Inc()
	} else if p.From > pos.Committed && pos.Committed != pos.Min {
		return fmt.Errorf("master plans to stream from %d but this log ends at %d", p.From, pos.Committed)
	}
	cur, err := s.host.Epochs(s.ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(cur, p.Epochs) {
		if err := s.host.SetEpochs(s.ctx, p.Epochs); err != nil {
			return fmt.Errorf("adopt the master's epoch history: %w", err)
		}
	}
	maxE := p.MaxEpoch
	if len(p.Epochs) > 0 {
		maxE = max(maxE, p.Epochs[len(p.Epochs)-1].Epoch)
	}
	if err := s.n.state.update(func(ns *NodeState) {
		ns.MaxEpoch = max(ns.MaxEpoch, maxE)
		ns.Takeovers = append(ns.Takeovers, p.Takeovers...)
	}); err != nil {
		a.log.Error("HA: persist replication state", "err", err)
	}
	a.hist, a.end, a.ackFlushed, a.streaming = slices.Clone(p.Epochs), p.From, p.AckFlushed, true
	s.mu.Lock()
	s.end = p.From
	s.mu.Unlock()
	a.log.Info("HA: streaming from master", "from", p.From, "ack_on_flushed", p.AckFlushed)
	return a.ack()
}

// applyData appends one DATA frame at the slave's end.
func (a *applier) applyData(payload []byte) error {
	s := a.s
	h, data, err := DecodeData(payload)
	if err != nil {
		return s.protocol(a.c, err.Error())
	}
	if h.Offset != a.end || len(data) == 0 {
		return s.protocol(a.c, fmt.Sprintf("data at %d (%d bytes), this log ends at %d", h.Offset, len(data), a.end))
	}
	if h.Epoch != 0 {
		n := len(a.hist)
		switch {
		case n > 0 && a.hist[n-1].Epoch == h.Epoch && a.hist[n-1].StartOffset == h.EpochStart:
		case n == 0 || (h.Epoch > a.hist[n-1].Epoch && h.EpochStart >= a.hist[n-1].StartOffset):
			next := append(slices.Clone(a.hist), sdk.Epoch{Epoch: h.Epoch, StartOffset: h.EpochStart})
			if err := s.host.SetEpochs(s.ctx, next); err != nil {
				return fmt.Errorf("record epoch %d at %d: %w", h.Epoch, h.EpochStart, err)
			}
			a.hist = next
			if err := s.n.state.update(func(ns *NodeState) { ns.MaxEpoch = max(ns.MaxEpoch, h.Epoch) }); err != nil {
				a.log.Error("HA: persist replication state", "err", err)
			}
		default:
			return s.protocol(a.c, fmt.Sprintf("data in epoch %d (from %d) does not follow this history's last epoch %v", h.Epoch, h.EpochStart, a.hist[n-1]))
		}
	}
	if err := s.host.AppendLog(s.ctx, h.Offset, data); err != nil {
		a.c.SendError(CodeInternal, err.Error())
		return fmt.Errorf("append replicated data at %d: %w", h.Offset, err)
	}
	a.end += int64(len(data))
	a.pending = true
	s.n.met.bytesReceived.Add(len(data))
	s.mu.Lock()
	s.end = a.end
	s.masterCommitted = max(s.masterCommitted, h.Committed)
	s.mu.Unlock()
	return nil
}

// ack reports the slave's end (and, when the master asks for flushed
// acknowledgements, flushes first).
func (a *applier) ack() error {
	s := a.s
	m := Ack{Received: a.end}
	if a.ackFlushed {
		f, err := s.host.Flush(s.ctx)
		if err != nil {
			return fmt.Errorf("flush before acknowledging: %w", err)
		}
		m.Flushed = min(f, a.end)
	}
	a.ackBuf = m.appendTo(a.ackBuf[:0])
	if err := a.c.WriteFrame(true, FrameAck, a.ackBuf); err != nil {
		return err
	}
	a.pending = false
	a.lastAck = time.Now()
	return nil
}
