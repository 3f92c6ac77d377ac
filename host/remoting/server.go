package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Server defaults.
const (
	// DefaultMaxConns is the default cap on simultaneous connections.
	DefaultMaxConns = 10000
	// DefaultIdleTimeout is the default time a connection may stay without
	// sending a frame before the server closes it. Clients send at least a
	// heartbeat every 30 s, and rocketmq-client-go itself uses 120 s.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultWriteTimeout is the default time a batch of responses may take
	// to be written before the connection is considered dead.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxInflight is the default number of asynchronous handlers
	// (Request.Go) one connection may have running at once.
	DefaultMaxInflight = 4096
)

// ErrConnClosed is returned when sending on, or waiting for a response from,
// a connection that is closed or closing.
var ErrConnClosed = errors.New("remoting: connection closed")

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("remoting: server closed")

// ServerConfig configures a Server. Zero fields take the defaults.
type ServerConfig struct {
	// MaxConns caps simultaneous connections; a connection accepted over
	// the cap is closed at once. Default DefaultMaxConns.
	MaxConns int
	// IdleTimeout closes a connection that sends no frame for this long.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// WriteTimeout bounds one batch of writes; a peer that does not read
	// for this long is disconnected. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxFrame bounds an incoming frame's length; a larger frame closes
	// the connection that sent it. Default DefaultMaxFrame.
	MaxFrame int
	// MaxInflight caps the asynchronous handlers per connection; when it is
	// reached the connection's reader waits, which applies back-pressure
	// to that client only. Default DefaultMaxInflight.
	MaxInflight int
	// Budget bounds the bytes of requests held in memory, across every
	// connection of every server given the same Budget (share one per
	// process for a global bound). A frame's bytes are reserved as they
	// arrive, before the buffer that holds them grows: a frame wholly
	// arrived in the connection's 64 KiB read buffer in one piece, a
	// larger or slower one piece by piece, each piece at most a quarter
	// more than what has arrived (see Budget for the rules that keep
	// partly read frames from filling it). They are released when the
	// handler has returned and every Request.Go and Request.Async it
	// started has finished (for a handler that panicked: at once, see
	// Request.Async), or when reading the frame fails (a response frame
	// to Conn.Invoke: once handed over). A reader whose next piece does
	// not fit waits, reading nothing more from its socket (TCP
	// back-pressure on that client; the answers it already holds are
	// written first); the wait does not count as idleness. A frame
	// larger than the whole budget closes its connection at once, as an
	// over-MaxFrame frame does. Default: a budget of its own of
	// RequestBudget bytes.
	Budget *Budget
	// RequestBudget is the size of the server's own Budget when Budget is
	// nil. Default DefaultRequestBudget.
	RequestBudget int64
	// Logger receives connection-level events. Default slog.Default().
	Logger *slog.Logger
}

func (c *ServerConfig) withDefaults() ServerConfig {
	out := *c
	if out.MaxConns <= 0 {
		out.MaxConns = DefaultMaxConns
	}
	if out.IdleTimeout <= 0 {
		out.IdleTimeout = DefaultIdleTimeout
	}
	if out.WriteTimeout <= 0 {
		out.WriteTimeout = DefaultWriteTimeout
	}
	if out.MaxFrame <= 0 {
		out.MaxFrame = DefaultMaxFrame
	}
	if out.MaxInflight <= 0 {
		out.MaxInflight = DefaultMaxInflight
	}
	if out.Budget == nil {
		out.Budget = NewBudget(out.RequestBudget)
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// Handler processes one request.
//
// It is called on the connection's read goroutine, one request at a time in
// arrival order, so it must not block for long: anything that waits (long
// polling, durability acknowledgements, slow disk reads) belongs in
// req.Go. A non-nil return value is sent as the response (Reply semantics).
// A nil return means the handler has arranged the response itself through
// req.Go or req.Reply, or that there is none to send. Returned responses
// are written by the read goroutine itself when the batch of requests that
// arrived together has been handled (or 64 KiB of answers are pending), so
// a peer that stops reading its answers stops the reading of its requests
// once the socket's send buffer is full, and its connection is closed
// after WriteTimeout.
//
// A panicking handler is recovered; the request gets SYSTEM_ERROR.
type Handler func(req *Request) *Command

// Server is a RocketMQ remoting TCP server. Register handlers with Handle
// before calling Serve; then Serve may be called for any number of
// listeners. All methods are safe for concurrent use.
type Server struct {
	cfg      ServerConfig
	log      *slog.Logger
	handlers map[int16]Handler
	onClose  []func(*Conn)

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*Conn]struct{}
	wg        sync.WaitGroup

	nconns   atomic.Int64
	nextID   atomic.Uint64
	opaque   atomic.Int32
	rejected atomic.Uint64
	panics   atomic.Uint64
}

// NewServer returns a server with no handlers.
func NewServer(cfg ServerConfig) *Server {
	c := cfg.withDefaults()
	c.Budget.noteMaxFrame(int64(c.MaxFrame))
	return &Server{
		cfg:       c,
		log:       c.Logger,
		handlers:  make(map[int16]Handler),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*Conn]struct{}),
	}
}

// Handle registers h for request code. It must be called before Serve; a
// later registration for the same code replaces the earlier one.
func (s *Server) Handle(code int16, h Handler) { s.handlers[code] = h }

// OnConnClose registers f to run once for every connection after it has
// closed and its reader has stopped. It must be called before Serve. f runs
// on the connection's own goroutine; it must not block for long.
func (s *Server) OnConnClose(f func(*Conn)) { s.onClose = append(s.onClose, f) }

// NumConns returns the number of open connections.
func (s *Server) NumConns() int { return int(s.nconns.Load()) }

// Budget is the request memory budget the server draws on (shared with
// the other servers configured with the same one).
func (s *Server) Budget() *Budget { return s.cfg.Budget }

// Serve accepts connections on l until l fails or the server is closed, and
// serves each on its own goroutines. It returns ErrServerClosed after
// Close, or the listener's error. Serve owns l and closes it on return.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()

	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("remoting: accept failed, retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("accepting remoting connection: %w", err)
		}
		backoff = 0
		if s.nconns.Load() >= int64(s.cfg.MaxConns) {
			s.rejected.Add(1)
			s.log.Warn("remoting: connection limit reached, closing new connection", "remote", nc.RemoteAddr().String(), "limit", s.cfg.MaxConns)
			nc.Close()
			continue
		}
		c := s.newConn(nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.nconns.Add(1)
		s.wg.Add(2)
		s.mu.Unlock()
		go c.writeLoop()
		go c.readLoop()
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// Close stops accepting, closes every listener and connection (cancelling
// every request context), and waits until all connection goroutines and
// asynchronous handlers have returned. Responses not yet written are
// dropped. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for l := range s.listeners {
			l.Close()
		}
		for c := range s.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

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

// dispatch handles one request that holds nothing of the server's Budget.
func (s *Server) dispatch(c *Conn, cmd *Command) { s.dispatchHeld(c, cmd, 0) }

// dispatchHeld handles one request; it holds budget bytes of the server's
// Budget, which the request releases when done with them.
func (s *Server) dispatchHeld(c *Conn, cmd *Command, budget int64) {
	req := &Request{Cmd: cmd, Conn: c, budget: budget}
	req.refs.Store(1) // the handler's own, dropped when it returns
	defer req.unref()
	h := s.handlers[cmd.Code]
	if h == nil {
		c.replyInline(req, NewResponse(cmd, RequestCodeNotSupported, fmt.Sprintf("request code %d not supported", cmd.Code)))
		return
	}
	if resp := s.call(h, req); resp != nil {
		c.replyInline(req, resp)
	}
}

// call runs h. If h panics, the request is answered SYSTEM_ERROR and the
// Async replies it left outstanding are abandoned (see Request.Async).
func (s *Server) call(h Handler, req *Request) (resp *Command) {
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
			s.log.Error("remoting: handler panicked", "code", req.Cmd.Code, "conn", req.Conn.String(), "panic", r, "stack", string(debug.Stack()))
			resp = NewResponse(req.Cmd, SystemError, fmt.Sprintf("internal error handling code %d", req.Cmd.Code))
			req.abandonAsync()
		}
	}()
	return h(req)
}

// Request is one incoming request and the means to answer it.
type Request struct {
	// Cmd is the decoded request.
	Cmd *Command
	// Conn is the connection it arrived on.
	Conn *Conn

	replied atomic.Bool
	// budget is the Budget bytes the request's frame holds; refs counts
	// what may still use the frame (the handler until it returns, each
	// Go and Async until it finishes). The last unref releases budget.
	budget int64
	refs   atomic.Int32

	// asyncs are the reply functions Async returned that were not called
	// yet when the request's handler (or a Go function) panicked; see
	// abandonAsync.
	amu    sync.Mutex
	asyncs []*asyncReply
}

// asyncReply is one Async's hold on its request: a MaxInflight slot and a
// reference. done is set by whichever ends it first, the reply function or
// abandonAsync; the other then does nothing.
type asyncReply struct{ done atomic.Bool }

// abandonAsync ends every outstanding Async reply of r: its slot and
// reference are given back as its reply function would, and a later call
// of that function does nothing. Called when a handler or a Go function
// panicked: the request has been answered SYSTEM_ERROR, and whatever was
// to call the reply may never do so.
func (r *Request) abandonAsync() {
	r.amu.Lock()
	as := r.asyncs
	r.asyncs = nil
	r.amu.Unlock()
	for _, a := range as {
		if a.done.CompareAndSwap(false, true) {
			<-r.Conn.sem
			r.unref()
		}
	}
}

// ref notes one more user of the request's frame; unref drops one and
// releases the frame's budget when it was the last.
func (r *Request) ref() { r.refs.Add(1) }

func (r *Request) unref() {
	if r.refs.Add(-1) == 0 && r.budget > 0 {
		r.Conn.srv.cfg.Budget.Release(r.budget)
	}
}

// Context is cancelled when the request's connection closes (including at
// server Close). Long waits must end when it does.
func (r *Request) Context() context.Context { return r.Conn.ctx }

// Reply queues resp as the response to r: it sets resp's opaque, the
// response bit and the request's serialize type. It does nothing for a
// oneway request, after an earlier Reply, or when the connection is closed.
// It blocks only while the connection's write queue is full.
func (r *Request) Reply(resp *Command) {
	if !r.claim(resp) {
		return
	}
	_ = r.Conn.enqueue(resp)
}

// claim reports whether resp is to be sent as r's answer (Reply
// semantics: not nil, r not oneway, no answer sent before) and, if so,
// makes it the answer to r.
func (r *Request) claim(resp *Command) bool {
	if resp == nil || r.Cmd.IsOneway() || !r.replied.CompareAndSwap(false, true) {
		return false
	}
	r.prepare(resp)
	return true
}

// prepare makes resp the answer to r.
func (r *Request) prepare(resp *Command) {
	resp.Opaque = r.Cmd.Opaque
	resp.Flag |= FlagResponse
	resp.SerializeType = r.Cmd.SerializeType
	if resp.Language == "" {
		resp.Language = ServerLanguage
	}
	if resp.Version == 0 {
		resp.Version = ServerVersion
	}
}

// Async lets a handler answer later without a goroutine of its own. It
// takes one of the connection's MaxInflight slots, waiting for one like
// Go does, and a reference on the request (its frame's budget stays
// reserved), and returns the function that answers (Reply semantics; nil
// sends nothing) and gives both back; ok is false, and nothing was taken,
// when the connection closed meanwhile. The returned function must be
// called once, from any goroutine; it never blocks (when the
// connection's write queue is full, the answer is queued from a new
// goroutine), so callers may call it from a flusher's or a replicator's
// release path. Calls after the first do nothing.
//
// If the handler panics (or the Go function that called Async does), the
// request is answered SYSTEM_ERROR and every reply function of it not
// called by then is ended at once: its slot and the budget are given
// back, and calling it later does nothing.
func (r *Request) Async() (reply func(*Command), ok bool) {
	c := r.Conn
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return nil, false
	}
	r.ref()
	a := &asyncReply{}
	r.amu.Lock()
	r.asyncs = append(r.asyncs, a)
	r.amu.Unlock()
	return func(resp *Command) {
		if !a.done.CompareAndSwap(false, true) {
			return
		}
		r.amu.Lock()
		for i, x := range r.asyncs {
			if x == a {
				r.asyncs = slices.Delete(r.asyncs, i, i+1)
				break
			}
		}
		r.amu.Unlock()
		defer r.unref()
		defer func() { <-c.sem }()
		if !r.claim(resp) {
			return
		}
		select {
		case c.out <- resp:
		default:
			go func() { _ = c.enqueue(resp) }()
		}
	}, true
}

// Go runs f on a new goroutine and replies with its result (Reply
// semantics; nil sends nothing). The ctx given to f is the connection's
// context. The server's Close waits for f to return. When the connection
// already has MaxInflight such goroutines, Go waits for one to finish
// (back-pressure on this connection only); if the connection closes
// meanwhile, f is not run.
func (r *Request) Go(f func(ctx context.Context) *Command) {
	c := r.Conn
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return
	}
	c.srv.wg.Add(1)
	r.ref()
	go func() {
		defer c.srv.wg.Done()
		defer r.unref()
		defer func() { <-c.sem }()
		var resp *Command
		func() {
			defer func() {
				if p := recover(); p != nil {
					c.srv.panics.Add(1)
					c.srv.log.Error("remoting: async handler panicked", "code", r.Cmd.Code, "conn", c.String(), "panic", p, "stack", string(debug.Stack()))
					resp = NewResponse(r.Cmd, SystemError, fmt.Sprintf("internal error handling code %d", r.Cmd.Code))
					r.abandonAsync()
				}
			}()
			resp = f(c.ctx)
		}()
		r.Reply(resp)
	}()
}
