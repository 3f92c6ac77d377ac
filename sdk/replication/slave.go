package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
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

// session runs one connection: it dials and authenticates the master,
// sends this replica's state, then follows the master's frames until the
// connection ends. streamed reports whether it got as far as receiving
// the log; err is why the session ended.
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
	ap, err := s.sendState(c, mid, log)
	if err != nil {
		return false, err
	}
	return s.follow(c, ap, log)
}

// sendState sends the master this replica's STATE (its log's bounds, its
// epoch history and the highest epoch it knows) and records the master's
// ID and this log's committed end for status. It returns the session's
// applier, positioned at that end and not yet streaming.
func (s *slave) sendState(c *Conn, mid string, log *slog.Logger) (*applier, error) {
	pos, err := s.host.Positions(s.ctx)
	if err != nil {
		return nil, err
	}
	hist, err := s.host.Epochs(s.ctx)
	if err != nil {
		return nil, err
	}
	ns := s.n.state.get()
	maxE := ns.MaxEpoch
	if len(hist) > 0 {
		maxE = max(maxE, hist[len(hist)-1].Epoch)
	}
	st := State{Min: pos.Min, End: pos.Committed, MaxEpoch: maxE, Epochs: hist, Takeovers: ns.Takeovers}
	if err := c.WriteFrame(true, FrameState, st.Marshal()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.masterID, s.end = mid, pos.Committed
	s.mu.Unlock()
	return &applier{s: s, c: c, hist: hist, end: pos.Committed, log: log}, nil
}

// follow reads the master's frames and applies them (see handle) until
// the session ends, acknowledging as ackDue says. Until the PLAN, frames
// are read here; once streaming, a reader goroutine reads the next frame
// while this one applies the last (stopped when follow returns).
func (s *slave) follow(c *Conn, ap *applier, log *slog.Logger) (streamed bool, err error) {
	var rd *pipedReader
	defer func() {
		if rd != nil {
			rd.stop()
		}
	}()
	for {
		f, more, err := nextFrame(c, rd)
		if err != nil {
			return ap.streaming, err
		}
		done, streamed, err := s.handle(c, ap, f, log)
		if rd != nil {
			rd.release(f.Payload) // handle is done with it (applied or copied)
		}
		if done {
			return streamed, err
		}
		if ap.ackDue(more) {
			if err := ap.ack(); err != nil {
				return true, err
			}
		}
		if ap.streaming && rd == nil {
			rd = startPipedReader(c)
		}
	}
}

// nextFrame returns the session's next frame: from c itself while rd is
// nil, else from rd. more reports that more input is already here (so
// the acknowledgement can wait for it).
func nextFrame(c *Conn, rd *pipedReader) (f Frame, more bool, err error) {
	if rd == nil {
		if f, err = c.ReadFrame(); err != nil {
			return Frame{}, false, err
		}
		return f, c.Buffered() > 0, nil
	}
	pf := <-rd.frames
	if pf.err != nil {
		return Frame{}, false, pf.err
	}
	return pf.f, pf.more || len(rd.frames) > 0, nil
}

// handle applies one frame; done reports that the session ends, with
// (streamed, err).
func (s *slave) handle(c *Conn, ap *applier, f Frame, log *slog.Logger) (done, streamed bool, err error) {
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
	return false, false, nil
}

func (s *slave) protocol(c *Conn, what string) error {
	c.SendError(CodeProtocol, what)
	return fmt.Errorf("%w: from master: %s", ErrBadFrame, what)
}
