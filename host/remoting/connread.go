package remoting

import (
	"bufio"
	"errors"
	"io"
	"net"
	"time"
)

// readLoop reads and handles the connection's frames until reading fails
// or the connection closes, then runs the OnConnClose hooks. Requests are
// handled in arrival order (dispatchHeld); their inline answers are
// written when a batch of frames that arrived together ends.
func (c *Conn) readLoop() {
	s := c.srv
	defer func() {
		c.Close()
		// Wait for nothing else: handlers observe c.ctx; hooks run now.
		for _, f := range s.onClose {
			f(c)
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.nconns.Add(-1)
		s.wg.Done()
	}()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	budget := s.cfg.Budget
	fb := &frameBudget{c: c, b: budget}
	for {
		if !FrameBuffered(br) {
			// The next read may block: that is where idleness counts.
			_ = c.nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		cmd, err := readCommand(br, s.cfg.MaxFrame, fb)
		fb.finish()
		reserved := fb.reserved
		fb.reserved = 0
		if err != nil {
			budget.Release(reserved)
			c.flushInline() // answers to the frames before a bad one
			c.readFailed(err)
			return
		}
		if cmd.IsResponse() {
			c.pmu.Lock()
			ch := c.pending[cmd.Opaque]
			c.pmu.Unlock()
			if ch != nil {
				select {
				case ch <- cmd:
				default:
				}
			}
			budget.Release(reserved)
		} else {
			s.dispatchHeld(c, cmd, reserved)
		}
		// The end of a batch (a response can end one too) writes the
		// answers the reader holds.
		more := FrameBuffered(br)
		if !more && !c.flushInline() {
			return
		}
		c.setReadBusy(more)
	}
}

// frameBudget reserves, for a connection's reader, the budget of the frame
// being read (readCommand's frameReserver), following the rules in Budget's
// doc comment.
type frameBudget struct {
	c *Conn
	b *Budget
	// reserved is what the frame holds of the budget; streamed the part
	// of it counted against the stream share; lane whether the frame
	// holds the lane. finish ends the last two; reserved is the reader's
	// to hand on or release.
	reserved int64
	streamed int64
	lane     bool
}

func (f *frameBudget) begin(total int64) error {
	if total > f.b.Limit() {
		return f.b.Acquire(f.c.ctx, total) // refused at once
	}
	return nil
}

func (f *frameBudget) reserve(n int64, partial bool) error {
	switch {
	case !partial || f.lane:
		// Bytes in hand that end the frame, which will be read at once,
		// or the lane holder's next piece, which the share leaves room
		// for: neither can hold up other frames for good.
		if err := f.acquire(n, f.lane); err != nil {
			return err
		}
	case f.b.takeStream(n):
		if err := f.acquire(n, false); err != nil {
			f.b.releaseStream(n)
			return err
		}
		f.streamed += n
	default:
		// The share is full: wait for the lane. The frame's bytes so far
		// stop counting against the share.
		f.aboutToWait()
		if err := f.b.takeLane(f.c.ctx); err != nil {
			return err
		}
		f.lane = true
		f.b.releaseStream(f.streamed)
		f.streamed = 0
		f.resetDeadline()
		if err := f.acquire(n, true); err != nil {
			return err
		}
	}
	f.reserved += n
	return nil
}

// acquire takes n bytes of the budget, first flushing the answers the
// reader holds if it has to wait.
func (f *frameBudget) acquire(n int64, first bool) error {
	if f.b.tryAcquireAt(n, first) {
		return nil
	}
	f.aboutToWait()
	if err := f.b.acquire(f.c.ctx, n, first); err != nil {
		return err
	}
	f.resetDeadline()
	return nil
}

// aboutToWait: the answers held for this batch go out first, and the
// writer stops holding its own for the batch's end.
func (f *frameBudget) aboutToWait() {
	if !f.c.flushInline() {
		return // closed: the wait ends at once
	}
	f.c.setReadBusy(false)
}

// resetDeadline: waiting for room is not the client's idleness.
func (f *frameBudget) resetDeadline() {
	_ = f.c.nc.SetReadDeadline(time.Now().Add(f.c.srv.cfg.IdleTimeout))
}

// finish ends the frame's claim on the stream share and the lane, once it
// is read (or reading it failed); what it reserved stays reserved.
func (f *frameBudget) finish() {
	f.b.releaseStream(f.streamed)
	f.streamed = 0
	if f.lane {
		f.lane = false
		f.b.releaseLane()
	}
}

// setReadBusy records whether the reader is in the middle of a batch;
// ending one kicks the writer if it holds frames for the batch's end.
func (c *Conn) setReadBusy(more bool) {
	if more == c.readBusy.Load() {
		return
	}
	c.readBusy.Store(more)
	if !more && c.held.CompareAndSwap(true, false) {
		select {
		case c.flushKick <- struct{}{}:
		default:
		}
	}
}

func (c *Conn) readFailed(err error) {
	if c.ctx.Err() != nil {
		return // closed by us
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.srv.log.Debug("remoting: connection closed by peer", "conn", c.String())
	case errors.As(err, &ne) && ne.Timeout():
		c.srv.log.Info("remoting: idle connection closed", "conn", c.String(), "idle", c.srv.cfg.IdleTimeout)
	case errors.Is(err, ErrConnClosed):
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrMalformed):
		c.srv.log.Warn("remoting: bad frame, closing connection", "conn", c.String(), "err", err)
	default:
		c.srv.log.Info("remoting: read failed, closing connection", "conn", c.String(), "err", err)
	}
}
