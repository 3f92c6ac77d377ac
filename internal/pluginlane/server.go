package pluginlane

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// tokenSize is the length of a server's random token.
const tokenSize = 32

// Server serves one gRPC service's methods to the one client that
// connects to its socket with its token. Create it with NewServer, run
// Serve, end it with Close.
type Server struct {
	dir   string // the server's own directory, holding the socket
	path  string
	token []byte
	ln    *net.UnixListener
	unary map[string]grpc.MethodDesc
	strm  map[string]grpc.StreamDesc
	impl  any

	inline map[string]bool // unary methods run by the reading goroutine itself

	ctx    context.Context // cancelled by Close or when the connection ends
	cancel context.CancelFunc
	calls  atomic.Uint64 // calls received (for tests and metrics)

	mu     sync.Mutex
	nc     net.Conn
	active map[uint32]context.CancelFunc
	closed bool
	wg     sync.WaitGroup
}

// NewServer listens on a fresh unix socket in a new directory under dir
// (the system temporary directory when empty), for desc's methods served
// by impl (what grpc.Server.RegisterService would be given).
func NewServer(dir string, desc *grpc.ServiceDesc, impl any) (*Server, error) {
	own, err := os.MkdirTemp(dir, "lane-")
	if err != nil {
		return nil, fmt.Errorf("plugin lane: make its socket directory: %w", err)
	}
	path := filepath.Join(own, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.RemoveAll(own)
		return nil, fmt.Errorf("plugin lane: listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	token := make([]byte, tokenSize)
	if _, err := rand.Read(token); err != nil {
		ln.Close()
		os.RemoveAll(own)
		return nil, fmt.Errorf("plugin lane: make a token: %w", err)
	}
	s := &Server{dir: own, path: path, token: token, ln: ln, impl: impl,
		unary: make(map[string]grpc.MethodDesc), strm: make(map[string]grpc.StreamDesc),
		active: make(map[uint32]context.CancelFunc), inline: make(map[string]bool)}
	for _, m := range desc.Methods {
		s.unary["/"+desc.ServiceName+"/"+m.MethodName] = m
	}
	for _, m := range desc.Streams {
		s.strm["/"+desc.ServiceName+"/"+m.StreamName] = m
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Inline names unary methods that never block for long (no wait for an
// event, no fsync): the goroutine reading the connection runs them itself,
// in arrival order, which saves a goroutine hand-off per call; every other
// call runs in its own goroutine. Call it before Serve.
func (s *Server) Inline(methods ...string) {
	for _, m := range methods {
		s.inline[m] = true
	}
}

// Addr is the socket path a client dials.
func (s *Server) Addr() string { return s.path }

// Token is what the client must present.
func (s *Server) Token() []byte { return s.token }

// Calls is the number of calls the server received.
func (s *Server) Calls() uint64 { return s.calls.Load() }

// Connected reports whether a client presented the token.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nc != nil
}

// Serve accepts the one connection (waiting at most acceptWithin), checks
// its token and serves it until it ends or Close. It returns why it
// stopped: nil after Close.
func (s *Server) Serve(acceptWithin time.Duration) error {
	_ = s.ln.SetDeadline(time.Now().Add(acceptWithin))
	nc, err := s.ln.Accept()
	s.ln.Close() // one connection only; removes the socket file
	os.RemoveAll(s.dir)
	if err != nil {
		if s.isClosed() {
			return nil
		}
		return fmt.Errorf("plugin lane: accept: %w", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return nil
	}
	s.mu.Unlock()
	br := bufio.NewReaderSize(nc, 64<<10)
	w := newWriter(nc)
	if err := s.hello(nc, br, w); err != nil {
		nc.Close()
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return nil
	}
	s.nc = nc
	s.mu.Unlock()
	err = s.loop(br, w)
	s.end(nc)
	if s.isClosed() {
		return nil
	}
	return err
}

// hello checks the client's token and answers it.
func (s *Server) hello(nc net.Conn, br *bufio.Reader, w *writer) error {
	_ = nc.SetReadDeadline(time.Now().Add(helloTimeout))
	f, err := readFrame(br)
	if err != nil {
		return fmt.Errorf("plugin lane: read the hello: %w", err)
	}
	if f.typ != frameHello || f.id != 0 || subtle.ConstantTimeCompare(f.body, s.token) != 1 {
		return errors.New("plugin lane: the client did not present the token")
	}
	_ = nc.SetReadDeadline(time.Time{})
	return w.send(frameReply, 0, appendStatus(nil, nil))
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// loop reads frames until the connection ends.
func (s *Server) loop(br *bufio.Reader, w *writer) error {
	for {
		f, err := readFrame(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch f.typ {
		case frameCall:
			h, req, err := parseCall(f.body)
			if err != nil {
				return err
			}
			s.calls.Add(1)
			s.dispatch(w, f.id, h, req)
		case frameCancel:
			s.mu.Lock()
			cancel := s.active[f.id]
			s.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		default:
			return fmt.Errorf("plugin lane: unexpected frame type %d from the plugin", f.typ)
		}
	}
}

// dispatch runs call id: in its own goroutine, or here for an Inline
// method.
func (s *Server) dispatch(w *writer, id uint32, h callHeader, req []byte) {
	ctx, cancel := s.ctx, context.CancelFunc(nil)
	if h.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		s.reply(w, id, frameReply, h.method, nil, status.Error(codes.Unavailable, "plugin lane: the host closed the lane"))
		return
	}
	if prev := s.active[id]; prev != nil {
		prev() // an id reused while its call still runs: the old one is abandoned
	}
	s.active[id] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	run := func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			if s.active[id] != nil {
				delete(s.active, id)
			}
			s.mu.Unlock()
			cancel()
		}()
		dec := func(m any) error {
			pm, ok := m.(proto.Message)
			if !ok {
				return status.Errorf(codes.Internal, "plugin lane: %s: request %T is not a protobuf message", h.method, m)
			}
			if err := proto.Unmarshal(req, pm); err != nil {
				return status.Errorf(codes.InvalidArgument, "plugin lane: %s: decode request: %v", h.method, err)
			}
			return nil
		}
		if md, ok := s.unary[h.method]; ok {
			resp, err := md.Handler(s.impl, ctx, dec, nil)
			s.reply(w, id, frameReply, h.method, resp, err)
			return
		}
		sd, ok := s.strm[h.method]
		switch {
		case !ok:
			s.reply(w, id, frameReply, h.method, nil, status.Errorf(codes.Unimplemented, "plugin lane: unknown method %s", h.method))
		case sd.ClientStreams:
			s.reply(w, id, frameEnd, h.method, nil, status.Errorf(codes.Unimplemented, "plugin lane: %s: client-streaming methods are not carried", h.method))
		default:
			err := sd.Handler(s.impl, &serverStream{ctx: ctx, w: w, id: id, method: h.method, dec: dec})
			s.reply(w, id, frameEnd, h.method, nil, err)
		}
	}
	if s.inline[h.method] {
		run()
		return
	}
	go run()
}

// reply sends a call's result (typ frameReply) or a stream's end.
func (s *Server) reply(w *writer, id uint32, typ byte, method string, resp any, err error) {
	var body []byte
	if err == nil && typ == frameReply {
		m, ok := resp.(proto.Message)
		if !ok {
			err = status.Errorf(codes.Internal, "plugin lane: %s: response %T is not a protobuf message", method, resp)
		} else {
			var merr error
			if body, merr = (proto.MarshalOptions{}).MarshalAppend(appendStatus(nil, nil), m); merr != nil {
				err = status.Errorf(codes.Internal, "plugin lane: %s: encode response: %v", method, merr)
			}
		}
	}
	if err != nil || typ == frameEnd {
		body = appendStatus(nil, err)
	}
	if frameOverhead+len(body) > MaxFrame {
		body = appendStatus(nil, status.Errorf(codes.ResourceExhausted, "plugin lane: %s: a %d-byte response is over the %d-byte frame limit", method, len(body), MaxFrame))
	}
	_ = w.send(typ, id, body) // a failed send ends the connection's reader too
}

// end closes the connection and cancels every handler.
func (s *Server) end(nc net.Conn) {
	nc.Close()
	s.cancel()
}

// Close stops the server: the listener and the connection close, every
// handler's context is cancelled, and Close waits for the handlers to
// return (at most closeWait).
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	nc := s.nc
	s.mu.Unlock()
	// The connection closes before the handlers' contexts end, so a call
	// in flight reads as the host gone (Unavailable), not as cancelled.
	if nc != nil {
		nc.Close()
	}
	s.ln.Close()
	os.RemoveAll(s.dir)
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
	return nil
}

// closeWait bounds Close's wait for handlers that ignore their context.
const closeWait = 5 * time.Second

// serverStream is a server-streaming call's grpc.ServerStream.
type serverStream struct {
	ctx    context.Context
	w      *writer
	id     uint32
	method string
	dec    func(any) error
	read   bool
}

func (s *serverStream) SetHeader(metadata.MD) error  { return nil }
func (s *serverStream) SendHeader(metadata.MD) error { return nil }
func (s *serverStream) SetTrailer(metadata.MD)       {}
func (s *serverStream) Context() context.Context     { return s.ctx }

func (s *serverStream) SendMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "plugin lane: %s: message %T is not a protobuf message", s.method, m)
	}
	b, err := proto.Marshal(pm)
	if err != nil {
		return status.Errorf(codes.Internal, "plugin lane: %s: encode stream message: %v", s.method, err)
	}
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return s.w.send(framePush, s.id, b)
}

// RecvMsg returns the call's one request, then io.EOF.
func (s *serverStream) RecvMsg(m any) error {
	if s.read {
		return io.EOF
	}
	s.read = true
	return s.dec(m)
}
