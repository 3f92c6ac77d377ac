package replication

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
