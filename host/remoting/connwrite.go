package remoting

import (
	"time"
)

// writeLoop writes queued frames and flushes them when nothing more is
// queued and the reader is not in the middle of a batch of requests that
// arrived together: requests pipelined in one read are answered with one
// write(2). It writes whole frames only (never a frame's head with its
// tail held back): the reader writes its own answers between the writer's
// writes (flushInline), under the same lock.
func (c *Conn) writeLoop() {
	defer c.srv.wg.Done()
	var buf []byte
	for {
		var cmd *Command
		select {
		case cmd = <-c.out:
		case <-c.flushKick:
		case <-c.ctx.Done():
			return
		}
		for cmd != nil {
			buf = cmd.AppendFrame(buf)
			if len(buf) >= writeFlushBytes {
				if !c.writeFrames(buf) {
					return
				}
				buf = reuse(buf)
			}
			select {
			case cmd = <-c.out:
			default:
				cmd = nil
			}
		}
		if len(buf) == 0 {
			continue
		}
		if c.readBusy.Load() {
			// Ask the reader for a kick at the end of its batch, then
			// look again: either this load sees the batch ended or the
			// reader sees held (both atomics are sequentially
			// consistent), so the frames are never left behind.
			c.held.Store(true)
			if c.readBusy.Load() {
				continue
			}
		}
		c.held.Store(false)
		if !c.writeFrames(buf) {
			return
		}
		buf = reuse(buf)
	}
}

// writeFlushBytes is how many bytes of whole frames either writer
// gathers before writing them even in the middle of a batch.
const writeFlushBytes = 64 << 10

// reuse empties buf for the next frames, dropping it when a large frame
// (a pull body) made it grow past writeFlushBytes: an idle connection
// keeps at most that much per writer, not the largest answer it ever
// sent.
func reuse(buf []byte) []byte {
	if cap(buf) > 2*writeFlushBytes {
		return nil
	}
	return buf[:0]
}

// writeFrames writes b, which holds whole frames, under wlock with a
// fresh write deadline (taken after the lock, so that one writer's wait
// for the other does not eat into its own deadline). false means the
// write failed and the connection is closed.
func (c *Conn) writeFrames(b []byte) bool {
	c.wlock.Lock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	_, err := c.nc.Write(b)
	c.wlock.Unlock()
	if err != nil {
		c.writeFailed(err)
		return false
	}
	return true
}

// replyInline is Reply for a response the handler returned on the reader
// goroutine: it is encoded into rbuf, which flushInline writes.
func (c *Conn) replyInline(r *Request, resp *Command) bool {
	if !r.claim(resp) {
		return true
	}
	c.rbuf = resp.AppendFrame(c.rbuf)
	if len(c.rbuf) >= writeFlushBytes {
		return c.flushInline()
	}
	return true
}

// flushInline writes rbuf; false means the write failed and the
// connection is closed.
func (c *Conn) flushInline() bool {
	if len(c.rbuf) == 0 {
		return true
	}
	ok := c.writeFrames(c.rbuf)
	c.rbuf = reuse(c.rbuf)
	return ok
}

func (c *Conn) writeFailed(err error) {
	if c.ctx.Err() == nil {
		c.srv.log.Info("remoting: write failed, closing connection", "conn", c.String(), "err", err)
	}
	c.Close()
}
