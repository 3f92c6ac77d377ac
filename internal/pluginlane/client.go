package pluginlane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Conn is the client end of a lane. It implements
// grpc.ClientConnInterface, so a generated gRPC client runs on it
// (pluginpb.NewHostClient(conn)). Safe for concurrent use.
type Conn struct {
	nc net.Conn
	w  *writer

	mu    sync.Mutex
	next  uint32
	calls map[uint32]*pending
	err   error         // why the connection ended (set once, with done)
	done  chan struct{} // closed when the connection ends
}

var _ grpc.ClientConnInterface = (*Conn)(nil)

// pending is a call waiting for its reply, or a stream for its messages.
type pending struct {
	mu     sync.Mutex
	frames []frame       // replies, pushes and the end, in arrival order
	wake   chan struct{} // signalled (capacity 1) when frames grows
}

func (p *pending) put(f frame) {
	p.mu.Lock()
	p.frames = append(p.frames, f)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take returns the oldest frame, if any.
func (p *pending) take() (frame, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.frames) == 0 {
		return frame{}, false
	}
	f := p.frames[0]
	p.frames[0] = frame{}
	p.frames = p.frames[1:]
	return f, true
}

// helloTimeout bounds Dial's handshake when ctx has no earlier deadline.
const helloTimeout = 10 * time.Second

// Dial connects to the lane at addr (a unix socket path a server's Addr
// gave) and presents token. It returns once the server accepted the
// token; an error means the lane cannot be used (the caller keeps using
// gRPC).
func Dial(ctx context.Context, addr string, token []byte) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return nil, fmt.Errorf("plugin lane: dial %s: %w", addr, err)
	}
	dl := time.Now().Add(helloTimeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(dl) {
		dl = cd
	}
	_ = nc.SetDeadline(dl)
	w := newWriter(nc)
	br := bufio.NewReaderSize(nc, 64<<10)
	if err := w.send(frameHello, 0, token); err != nil {
		nc.Close()
		return nil, fmt.Errorf("plugin lane: send hello to %s: %w", addr, err)
	}
	f, err := readFrame(br)
	if err == nil && (f.typ != frameReply || f.id != 0) {
		err = fmt.Errorf("answered the hello with a frame of type %d for call %d", f.typ, f.id)
	}
	if err == nil {
		var code uint32
		if code, _, err = parseStatus(f.body); err == nil && code != 0 {
			err = fmt.Errorf("refused the hello (code %d)", code)
		}
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("plugin lane: handshake with %s: %w", addr, err)
	}
	_ = nc.SetDeadline(time.Time{})
	c := &Conn{nc: nc, w: w, calls: make(map[uint32]*pending), done: make(chan struct{})}
	go c.readLoop(br)
	return c, nil
}

// Close ends the connection; calls in flight return codes.Unavailable.
func (c *Conn) Close() error {
	c.fail(errors.New("lane closed by the plugin"))
	return nil
}

// fail ends the connection for cause (the first cause is kept).
func (c *Conn) fail(cause error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = cause
		close(c.done)
	}
	c.mu.Unlock()
	_ = c.nc.Close()
}

// unavailable is the status of a call on a failed connection.
func (c *Conn) unavailable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return status.Errorf(codes.Unavailable, "plugin lane to the host: %v", c.err)
}

func (c *Conn) readLoop(br *bufio.Reader) {
	for {
		f, err := readFrame(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the host closed the lane")
			}
			c.fail(err)
			return
		}
		switch f.typ {
		case frameReply, framePush, frameEnd:
		default:
			c.fail(fmt.Errorf("plugin lane: unexpected frame type %d from the host", f.typ))
			return
		}
		c.mu.Lock()
		p := c.calls[f.id]
		if f.typ != framePush {
			delete(c.calls, f.id)
		}
		c.mu.Unlock()
		if p != nil {
			p.put(f) // a reply to a call given up on is dropped
		}
	}
}

// start registers a call and sends its call frame.
func (c *Conn) start(ctx context.Context, method string, req any) (uint32, *pending, error) {
	m, ok := req.(proto.Message)
	if !ok {
		return 0, nil, status.Errorf(codes.Internal, "plugin lane: %s: request %T is not a protobuf message", method, req)
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return 0, nil, status.FromContextError(context.DeadlineExceeded).Err()
		}
	}
	hdr, err := appendCallHeader(nil, callHeader{method: method, timeout: timeout})
	if err != nil {
		return 0, nil, status.Error(codes.Internal, err.Error())
	}
	body, err := proto.Marshal(m)
	if err != nil {
		return 0, nil, status.Errorf(codes.Internal, "plugin lane: %s: encode request: %v", method, err)
	}
	if n := frameOverhead + len(hdr) + len(body); n > MaxFrame {
		return 0, nil, status.Errorf(codes.ResourceExhausted, "plugin lane: %s: a %d-byte request is over the %d-byte frame limit", method, n, MaxFrame)
	}
	p := &pending{wake: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, nil, c.unavailable()
	}
	c.next++
	if c.next == 0 {
		c.next = 1 // id 0 is the hello's
	}
	id := c.next
	c.calls[id] = p
	c.mu.Unlock()
	if err := c.w.send(frameCall, id, hdr, body); err != nil {
		c.fail(fmt.Errorf("send a call: %w", err))
		c.forget(id)
		return 0, nil, c.unavailable()
	}
	return id, p, nil
}

// forget drops a call's registration.
func (c *Conn) forget(id uint32) {
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
}

// abandon tells the server the client gave up on call id.
func (c *Conn) abandon(id uint32) {
	c.forget(id)
	_ = c.w.send(frameCancel, id)
}

// await waits for call id's next frame.
func (c *Conn) await(ctx context.Context, id uint32, p *pending) (frame, error) {
	for {
		if f, ok := p.take(); ok {
			return f, nil
		}
		select {
		case <-p.wake:
		case <-ctx.Done():
			if f, ok := p.take(); ok {
				return f, nil
			}
			c.abandon(id)
			return frame{}, status.FromContextError(ctx.Err()).Err()
		case <-c.done:
			if f, ok := p.take(); ok {
				return f, nil
			}
			return frame{}, c.unavailable()
		}
	}
}

// Invoke implements grpc.ClientConnInterface for a unary method.
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	id, p, err := c.start(ctx, method, args)
	if err != nil {
		return err
	}
	f, err := c.await(ctx, id, p)
	if err != nil {
		return err
	}
	if f.typ != frameReply {
		c.fail(fmt.Errorf("plugin lane: %s: a frame of type %d answered a unary call", method, f.typ))
		return c.unavailable()
	}
	return decodeResult(method, f.body, reply)
}

// decodeResult reads a reply's body into reply, or returns its status.
func decodeResult(method string, body []byte, reply any) error {
	code, rest, err := parseStatus(body)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if code != uint32(codes.OK) {
		return decodeStatus(code, rest)
	}
	m, ok := reply.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "plugin lane: %s: response %T is not a protobuf message", method, reply)
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return status.Errorf(codes.Internal, "plugin lane: %s: decode response: %v", method, err)
	}
	return nil
}

// NewStream implements grpc.ClientConnInterface for server-streaming
// methods (one request, then the server's messages).
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	if desc.ClientStreams {
		return nil, status.Errorf(codes.Unimplemented, "plugin lane: %s: client-streaming methods are not carried", method)
	}
	return &clientStream{c: c, ctx: ctx, method: method}, nil
}

// clientStream is one server-streaming call. Its request goes out with
// the first SendMsg.
type clientStream struct {
	c      *Conn
	ctx    context.Context
	method string
	id     uint32
	p      *pending
	stop   func() bool // ends the context watch
	ended  error       // io.EOF or the stream's status, once ended
}

func (s *clientStream) Header() (metadata.MD, error) { return nil, nil }
func (s *clientStream) Trailer() metadata.MD         { return nil }
func (s *clientStream) CloseSend() error             { return nil }
func (s *clientStream) Context() context.Context     { return s.ctx }

func (s *clientStream) SendMsg(m any) error {
	if s.p != nil {
		return status.Errorf(codes.Internal, "plugin lane: %s: a second request on a server stream", s.method)
	}
	id, p, err := s.c.start(s.ctx, s.method, m)
	if err != nil {
		return err
	}
	s.id, s.p = id, p
	// The server's handler ends when the client's context does, even if
	// nobody reads the stream again.
	s.stop = context.AfterFunc(s.ctx, func() { s.c.abandon(id) })
	return nil
}

func (s *clientStream) RecvMsg(m any) error {
	if s.ended != nil {
		return s.ended
	}
	if s.p == nil {
		return status.Errorf(codes.Internal, "plugin lane: %s: RecvMsg before SendMsg", s.method)
	}
	f, err := s.c.await(s.ctx, s.id, s.p)
	if err != nil {
		s.finish(err)
		return err
	}
	switch f.typ {
	case framePush:
		msg, ok := m.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "plugin lane: %s: message %T is not a protobuf message", s.method, m)
		}
		if err := proto.Unmarshal(f.body, msg); err != nil {
			return status.Errorf(codes.Internal, "plugin lane: %s: decode stream message: %v", s.method, err)
		}
		return nil
	case frameEnd, frameReply: // a reply: the server refused the stream (unknown method)
		code, rest, err := parseStatus(f.body)
		switch {
		case err != nil:
			err = status.Error(codes.Internal, err.Error())
		case code == uint32(codes.OK):
			err = io.EOF
		default:
			err = decodeStatus(code, rest)
		}
		s.finish(err)
		return err
	default:
		err := status.Errorf(codes.Internal, "plugin lane: %s: a frame of type %d on a stream", s.method, f.typ)
		s.finish(err)
		return err
	}
}

// finish records how the stream ended and stops watching its context.
func (s *clientStream) finish(err error) {
	s.ended = err
	if s.stop != nil {
		s.stop()
	}
	s.c.forget(s.id)
}
