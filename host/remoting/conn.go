package remoting

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
)

// Conn is one client connection. Its methods are safe for concurrent use.
type Conn struct {
	srv    *Server
	nc     net.Conn
	id     uint64
	remote netip.AddrPort
	local  netip.AddrPort

	ctx    context.Context
	cancel context.CancelFunc
	out    chan *Command
	sem    chan struct{}
	// readBusy: the reader holds more whole frames than it has handled,
	// so answers to them are coming; the writer holds its flush until the
	// reader kicks flushKick at the end of the batch.
	readBusy  atomic.Bool
	flushKick chan struct{}
	// held: the writer holds frames back for the end of the reader's
	// batch and waits for flushKick. The reader kicks only then: most
	// batches leave the writer nothing to write (their answers are the
	// reader's own), and a wake-up for nothing costs a goroutine switch.
	held atomic.Bool

	// wlock serializes writes to nc: the writer goroutine's and the
	// reader's own (rbuf).
	wlock sync.Mutex
	// rbuf holds the frames the reader answered inline in its current
	// batch (handlers that return their response); the reader writes it
	// itself when the batch ends, without waking the writer goroutine.
	// Only the reader touches it.
	rbuf []byte

	pmu     sync.Mutex
	pending map[int32]chan *Command

	closeOnce sync.Once
}

func (s *Server) newConn(nc net.Conn) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		srv:       s,
		nc:        nc,
		id:        s.nextID.Add(1),
		remote:    addrPortOf(nc.RemoteAddr()),
		local:     addrPortOf(nc.LocalAddr()),
		ctx:       ctx,
		cancel:    cancel,
		out:       make(chan *Command, 1024),
		flushKick: make(chan struct{}, 1),
		sem:       make(chan struct{}, s.cfg.MaxInflight),
		pending:   make(map[int32]chan *Command),
	}
	return c
}

func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	if a == nil {
		return netip.AddrPort{}
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// ID is a process-unique connection number (never 0).
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr is the peer's address (IPv4-mapped addresses unmapped).
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// LocalAddr is the local address the peer connected to.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// Context is cancelled when the connection closes.
func (c *Conn) Context() context.Context { return c.ctx }

// String describes the connection for logs.
func (c *Conn) String() string {
	return "conn#" + strconv.FormatUint(c.id, 10) + "(" + c.remote.String() + ")"
}

// Close closes the connection: its context is cancelled, queued writes are
// dropped, and OnConnClose hooks run once the reader has stopped. It is
// idempotent.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
	})
}

// Send queues cmd, a server-initiated request, for writing. It assigns
// cmd.Opaque from the server's own counter and clears the response bit;
// set FlagOneway in cmd.Flag when no answer is expected (an answer that
// arrives anyway is dropped). It blocks only while the connection's write
// queue is full, and returns ErrConnClosed if the connection is closed.
func (c *Conn) Send(cmd *Command) error {
	cmd.Opaque = c.srv.opaque.Add(1)
	cmd.Flag &^= FlagResponse
	return c.enqueue(cmd)
}

// Invoke sends cmd as a server-initiated request and waits for the peer's
// response (matched by opaque). It returns ctx's error if ctx ends first,
// or ErrConnClosed if the connection closes first.
func (c *Conn) Invoke(ctx context.Context, cmd *Command) (*Command, error) {
	cmd.Opaque = c.srv.opaque.Add(1)
	cmd.Flag &^= FlagResponse | FlagOneway
	ch := make(chan *Command, 1)
	c.pmu.Lock()
	c.pending[cmd.Opaque] = ch
	c.pmu.Unlock()
	defer func() {
		c.pmu.Lock()
		delete(c.pending, cmd.Opaque)
		c.pmu.Unlock()
	}()
	if err := c.enqueue(cmd); err != nil {
		return nil, err
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for response to code %d from %s: %w", cmd.Code, c, ctx.Err())
	case <-c.ctx.Done():
		return nil, fmt.Errorf("waiting for response to code %d from %s: %w", cmd.Code, c, ErrConnClosed)
	}
}

func (c *Conn) enqueue(cmd *Command) error {
	if c.ctx.Err() != nil {
		return ErrConnClosed
	}
	select {
	case c.out <- cmd:
		return nil
	case <-c.ctx.Done():
		return ErrConnClosed
	}
}
