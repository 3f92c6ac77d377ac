package remoting

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
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
	// Guard, when set, is asked about every request before its handler
	// runs (an unregistered code included), with the address it came
	// from: a non-nil error refuses the request. A refused request is
	// answered SYSTEM_ERROR with the error's text as its remark, as
	// RocketMQ answers an access-control failure; a refused oneway
	// request is dropped. Guard runs on the connection's read goroutine
	// and must not block. Default: every request proceeds.
	Guard func(remote netip.Addr, cmd *Command) error
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
	refused  atomic.Uint64
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

// Refuse makes the server answer code, a RocketMQ request keel does not
// implement, with REQUEST_CODE_NOT_SUPPORTED and remark (what keel does
// instead), where an unregistered code gets a bare "not supported". It
// must be called before Serve.
func (s *Server) Refuse(code int16, remark string) {
	s.Handle(code, func(req *Request) *Command { return NewResponse(req.Cmd, RequestCodeNotSupported, remark) })
}

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

// Refused is the number of requests ServerConfig.Guard refused.
func (s *Server) Refused() uint64 { return s.refused.Load() }
