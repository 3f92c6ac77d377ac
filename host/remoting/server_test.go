package remoting

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startServer starts s on 127.0.0.1:0 and returns its address; the server is
// closed at the end of the test.
func startServer(t testing.TB, s *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return l.Addr().String()
}

const (
	codeEcho  int16 = 1000
	codeDelay int16 = 1001
)

func newEchoServer(cfg ServerConfig) *Server {
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s := NewServer(cfg)
	s.Handle(codeEcho, func(req *Request) *Command {
		r := NewResponse(req.Cmd, Success, "")
		r.Body = req.Cmd.Body
		return r
	})
	s.Handle(codeDelay, func(req *Request) *Command {
		d, _ := time.ParseDuration(req.Cmd.Ext("delay"))
		req.Go(func(ctx context.Context) *Command {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil
			}
			r := NewResponse(req.Cmd, Success, "")
			r.Body = req.Cmd.Body
			return r
		})
		return nil
	})
	return s
}

func TestServerPipelinedOutOfOrder(t *testing.T) {
	addr := startServer(t, newEchoServer(ServerConfig{}))
	c := dialTest(t, addr)
	// Three requests written back to back: slow, medium, fast (inline).
	slow := c.start(&Command{Code: codeDelay, ExtFields: FieldsOf(map[string]string{"delay": "300ms"}), Body: []byte("slow")})
	med := c.start(&Command{Code: codeDelay, ExtFields: FieldsOf(map[string]string{"delay": "100ms"}), Body: []byte("med")})
	fast := c.start(&Command{Code: codeEcho, Body: []byte("fast")})
	for _, w := range []struct {
		ch   <-chan *Command
		body string
		op   int32
	}{{fast, "fast", 3}, {med, "med", 2}, {slow, "slow", 1}} {
		select {
		case r := <-w.ch:
			if string(r.Body) != w.body || r.Opaque != w.op || !r.IsResponse() {
				t.Fatalf("got %+v for %s", r, w.body)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("no response for %s", w.body)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if want := []int32{3, 2, 1}; len(c.arrivals) != 3 || c.arrivals[0] != want[0] || c.arrivals[1] != want[1] || c.arrivals[2] != want[2] {
		t.Fatalf("arrival order %v, want %v", c.arrivals, want)
	}
}

func TestServerManyPipelined(t *testing.T) {
	addr := startServer(t, newEchoServer(ServerConfig{}))
	c := dialTest(t, addr)
	var chans []<-chan *Command
	for i := range 500 {
		code := codeEcho
		if i%3 == 0 {
			code = codeDelay
		}
		chans = append(chans, c.start(&Command{Code: code, ExtFields: FieldsOf(map[string]string{"delay": "1ms"}), Body: []byte(strconv.Itoa(i))}))
	}
	for i, ch := range chans {
		select {
		case r := <-ch:
			if string(r.Body) != strconv.Itoa(i) {
				t.Fatalf("request %d answered with %q", i, r.Body)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d unanswered", i)
		}
	}
}

func TestServerUnknownCode(t *testing.T) {
	addr := startServer(t, newEchoServer(ServerConfig{}))
	c := dialTest(t, addr)
	r := c.call(4242, nil, nil)
	if r.Code != RequestCodeNotSupported || r.Remark == "" {
		t.Fatalf("got %+v", r)
	}
	// The connection stays usable.
	if r := c.call(codeEcho, nil, []byte("ok")); string(r.Body) != "ok" {
		t.Fatalf("echo after unknown code: %+v", r)
	}
}

func TestServerOnewayGetsNoResponse(t *testing.T) {
	addr := startServer(t, newEchoServer(ServerConfig{}))
	c := dialTest(t, addr)
	ow := c.start(&Command{Code: codeEcho, Flag: FlagOneway, Body: []byte("x")})
	ow2 := c.start(&Command{Code: 4242, Flag: FlagOneway})
	// A normal request after the oneway ones is answered; they are not.
	if r := c.call(codeEcho, nil, []byte("y")); string(r.Body) != "y" {
		t.Fatalf("got %+v", r)
	}
	select {
	case r := <-ow:
		t.Fatalf("oneway answered: %+v", r)
	case r := <-ow2:
		t.Fatalf("oneway unknown code answered: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestServerOversizeFrameClosesOnlyThatConnection(t *testing.T) {
	addr := startServer(t, newEchoServer(ServerConfig{MaxFrame: 1024}))
	good := dialTest(t, addr)
	bad := dialTest(t, addr)
	hdr := binary.BigEndian.AppendUint32(nil, 1<<20)
	bad.write(append(hdr, 0, 0, 0, 2, '{', '}'))
	if !bad.waitClosed(2 * time.Second) {
		t.Fatal("oversized frame did not close the connection")
	}
	if r := good.call(codeEcho, nil, make([]byte, 500)); len(r.Body) != 500 {
		t.Fatalf("other connection broken: %+v", r)
	}
	// A frame of exactly the limit is still fine (this is good's 2nd call,
	// so its opaque is 2).
	probe := &Command{Code: codeEcho, Language: "GO", Version: 317, Opaque: 2}
	body := make([]byte, 1024-(len(probe.AppendFrame(nil))-4))
	probe.Body = body
	if n := len(probe.AppendFrame(nil)) - 4; n != 1024 {
		t.Fatalf("test frame is %d bytes", n)
	}
	if r := good.call(codeEcho, nil, body); len(r.Body) != len(body) {
		t.Fatalf("frame at limit rejected")
	}
}

func TestServerMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	addr := startServer(t, newEchoServer(ServerConfig{}))
	good := dialTest(t, addr)
	bad := dialTest(t, addr)
	bad.write([]byte{0, 0, 0, 9, 0, 0, 0, 5, '{', 'n', 'o', 'p', 'e'})
	if !bad.waitClosed(2 * time.Second) {
		t.Fatal("malformed frame did not close the connection")
	}
	if r := good.call(codeEcho, nil, []byte("still")); string(r.Body) != "still" {
		t.Fatalf("got %+v", r)
	}
}

func TestServerIdleTimeout(t *testing.T) {
	addr := startServer(t, newEchoServer(ServerConfig{IdleTimeout: 300 * time.Millisecond}))
	idle := dialTest(t, addr)
	busy := dialTest(t, addr)
	start := time.Now()
	// busy keeps talking every 100 ms and must survive past the timeout.
	for time.Since(start) < 700*time.Millisecond {
		busy.call(codeEcho, nil, nil)
		time.Sleep(100 * time.Millisecond)
	}
	if !idle.waitClosed(time.Second) {
		t.Fatal("idle connection not closed")
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("closed too early: %v", el)
	}
	select {
	case <-busy.done:
		t.Fatal("busy connection closed")
	default:
	}
}

func TestServerConnectionCap(t *testing.T) {
	s := newEchoServer(ServerConfig{MaxConns: 2})
	addr := startServer(t, s)
	a := dialTest(t, addr)
	b := dialTest(t, addr)
	a.call(codeEcho, nil, nil)
	b.call(codeEcho, nil, nil)
	c := dialTest(t, addr)
	if !c.waitClosed(2 * time.Second) {
		t.Fatal("connection over the cap not closed")
	}
	if s.rejected.Load() != 1 {
		t.Fatalf("rejected = %d", s.rejected.Load())
	}
	a.nc.Close()
	deadline := time.Now().Add(2 * time.Second)
	for s.NumConns() > 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	d := dialTest(t, addr)
	if r := d.call(codeEcho, nil, []byte("in")); string(r.Body) != "in" {
		t.Fatalf("got %+v", r)
	}
}

func TestServerInitiatedRequests(t *testing.T) {
	s := newEchoServer(ServerConfig{})
	conns := make(chan *Conn, 1)
	s.Handle(codeEcho, func(req *Request) *Command {
		select {
		case conns <- req.Conn:
		default:
		}
		return NewResponse(req.Cmd, Success, "")
	})
	addr := startServer(t, s)
	c := dialTest(t, addr)
	c.call(codeEcho, nil, nil)
	sc := <-conns
	if sc.RemoteAddr().String() != c.nc.LocalAddr().String() {
		t.Fatalf("remote addr %v, want %v", sc.RemoteAddr(), c.nc.LocalAddr())
	}
	// Oneway notify.
	if err := sc.Send(&Command{Code: CodeNotifyConsumerIDsChanged, Flag: FlagOneway, ExtFields: FieldsOf(map[string]string{"consumerGroup": "g"})}); err != nil {
		t.Fatal(err)
	}
	n := <-c.inbound
	if n.Code != CodeNotifyConsumerIDsChanged || n.IsResponse() || !n.IsOneway() || n.Ext("consumerGroup") != "g" {
		t.Fatalf("notify %+v", n)
	}
	// Invoke: the test client answers the next inbound request.
	go func() {
		req := <-c.inbound
		resp := &Command{Code: 0, Opaque: req.Opaque, Flag: FlagResponse, Remark: "pong"}
		c.write(resp.AppendFrame(nil))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := sc.Invoke(ctx, &Command{Code: 9999})
	if err != nil || resp.Remark != "pong" {
		t.Fatalf("invoke: %+v %v", resp, err)
	}
	// Invoke on a closed connection fails with ErrConnClosed.
	c.nc.Close()
	<-sc.Context().Done()
	if _, err := sc.Invoke(ctx, &Command{Code: 9999}); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("invoke on closed conn: %v", err)
	}
}

func TestServerCloseWaitsForHandlers(t *testing.T) {
	s := NewServer(ServerConfig{Logger: quietLogger()})
	var finished atomic.Bool
	started := make(chan struct{})
	s.Handle(codeDelay, func(req *Request) *Command {
		req.Go(func(ctx context.Context) *Command {
			close(started)
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond)
			finished.Store(true)
			return nil
		})
		return nil
	})
	closed := make(chan int, 1)
	s.OnConnClose(func(*Conn) { closed <- 1 })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c := dialTest(t, l.Addr().String())
	c.start(&Command{Code: codeDelay})
	<-started
	s.Close()
	if !finished.Load() {
		t.Fatal("Close returned before the handler finished")
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	select {
	case <-closed:
	default:
		t.Fatal("OnConnClose hook not run")
	}
	if _, err := net.DialTimeout("tcp", l.Addr().String(), 200*time.Millisecond); err == nil {
		t.Fatal("still accepting after Close")
	}
	if err := s.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

func TestServerHandlerPanic(t *testing.T) {
	s := NewServer(ServerConfig{Logger: quietLogger()})
	s.Handle(7, func(req *Request) *Command { panic("boom") })
	s.Handle(8, func(req *Request) *Command {
		req.Go(func(context.Context) *Command { panic("async boom") })
		return nil
	})
	c := dialTest(t, startServer(t, s))
	if r := c.call(7, nil, nil); r.Code != SystemError {
		t.Fatalf("got %+v", r)
	}
	if r := c.call(8, nil, nil); r.Code != SystemError {
		t.Fatalf("got %+v", r)
	}
}

// countingListener counts the Write calls on the connections it accepts.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(p)
}

// TestPipelinedBatchOneWrite: requests that arrive in one read and are
// answered inline are answered with one write, not one per response.
func TestPipelinedBatchOneWrite(t *testing.T) {
	s := newEchoServer(ServerConfig{})
	const codeSlowEcho int16 = 1002
	s.Handle(codeSlowEcho, func(req *Request) *Command {
		time.Sleep(100 * time.Microsecond) // inline work: the writer gets the CPU meanwhile
		return NewResponse(req.Cmd, Success, "")
	})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: inner}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	defer func() {
		s.Close()
		<-served
	}()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const n = 50
	var batch []byte
	for i := 0; i < n; i++ {
		batch = (&Command{Code: codeSlowEcho, Opaque: int32(i + 1), Body: []byte("x")}).AppendFrame(batch)
	}
	if _, err := nc.Write(batch); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	for i := 0; i < n; i++ {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		r, err := ReadCommand(br, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Opaque != int32(i+1) {
			t.Fatalf("response %d has opaque %d", i, r.Opaque)
		}
	}
	// One read of the batch is the norm on loopback; a split read may
	// cost a second write.
	if w := l.writes.Load(); w > 2 {
		t.Fatalf("%d pipelined requests answered with %d writes, want 1 (2 at most)", n, w)
	}
}

func TestFrameBuffered(t *testing.T) {
	f := (&Command{Code: 1, Body: []byte("abc")}).AppendFrame(nil)
	for cut := 0; cut <= len(f); cut++ {
		br := bufio.NewReader(bytes.NewReader(f[:cut]))
		br.Peek(cut) // fill the buffer with what there is
		if got, want := FrameBuffered(br), cut == len(f); got != want {
			t.Errorf("%d of %d bytes buffered: FrameBuffered = %v", cut, len(f), got)
		}
	}
}

// TestAnswerBeforeResponseInOneBatch: a request and, in the same write, a
// response (to a server-initiated request) that ends the batch. The
// reader answers requests at the end of a batch; a response frame must
// end it too, or the answer waits for the client's next frame.
func TestAnswerBeforeResponseInOneBatch(t *testing.T) {
	s := newEchoServer(ServerConfig{})
	addr := startServer(t, s)
	c := dialTest(t, addr)
	req := &Command{Code: codeEcho, Opaque: c.opaque.Add(1), Language: "GO", Version: 317, Body: []byte("x")}
	ch := make(chan *Command, 1)
	c.mu.Lock()
	c.waiters[req.Opaque] = ch
	c.mu.Unlock()
	stray := &Command{Opaque: 424242, Flag: FlagResponse} // answers nothing the server asked
	c.write(append(req.AppendFrame(nil), stray.AppendFrame(nil)...))
	select {
	case resp := <-ch:
		if resp.Code != Success {
			t.Fatalf("response %+v", resp)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no answer: the reader kept it after a batch that ended with a response frame")
	}
}

// TestInlineAnswersNeverSplitAFrame: the writer goroutine is sending large
// answers of Go handlers while the reader answers inline at the end of its
// batch. Every frame must reach the client whole: a writer that wrote a
// frame's head and held its tail back (a buffered writer flushing when
// full) let the reader's answer land inside it.
func TestInlineAnswersNeverSplitAFrame(t *testing.T) {
	const codeBig, codeSlow int16 = 1100, 1101
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10/16)
	s := newEchoServer(ServerConfig{})
	s.Handle(codeBig, func(req *Request) *Command {
		req.Go(func(ctx context.Context) *Command {
			r := NewResponse(req.Cmd, Success, "")
			r.Body = big
			return r
		})
		return nil
	})
	s.Handle(codeSlow, func(req *Request) *Command {
		time.Sleep(300 * time.Millisecond) // the writer runs meanwhile
		r := NewResponse(req.Cmd, Success, "inline")
		r.Body = []byte("small")
		return r
	})
	addr := startServer(t, s)
	for round := 0; round < 3; round++ {
		c := dialTest(t, addr)
		var batch []byte
		var chans []chan *Command
		for _, code := range []int16{codeBig, codeBig, codeSlow} {
			cmd := &Command{Code: code, Opaque: c.opaque.Add(1), Language: "GO", Version: 317}
			ch := make(chan *Command, 1)
			c.mu.Lock()
			c.waiters[cmd.Opaque] = ch
			c.mu.Unlock()
			chans = append(chans, ch)
			batch = append(batch, cmd.AppendFrame(nil)...)
		}
		c.write(batch)
		for i, ch := range chans {
			select {
			case r := <-ch:
				want := big
				if i == 2 {
					want = []byte("small")
				}
				if r.Code != Success || !bytes.Equal(r.Body, want) {
					t.Fatalf("round %d response %d: code %d, %d-byte body (want %d)", round, i, r.Code, len(r.Body), len(want))
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: response %d never arrived whole (stream corrupted?)", round, i)
			}
		}
	}
}

// TestMixedAnswerPathsStress pipelines many requests answered by all three
// paths (returned on the reader, req.Go, req.Async answered from another
// goroutine), with bodies from empty to 300 KiB and writes cut at random
// frame boundaries. Every answer must arrive whole and belong to its
// request: the reader's inline writes and the writer goroutine's must never
// interleave inside a frame, and none may be lost.
func TestMixedAnswerPathsStress(t *testing.T) {
	const codeInline, codeGo, codeAsync int16 = 1200, 1201, 1202
	body := func(op int32, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(int(op)*31 + i)
		}
		return b
	}
	answer := func(req *Request) *Command {
		n, _ := strconv.Atoi(req.Cmd.Ext("n"))
		r := NewResponse(req.Cmd, Success, "")
		r.Body = body(req.Cmd.Opaque, n)
		return r
	}
	jitter := func(op int32) time.Duration { return time.Duration(op%7) * 70 * time.Microsecond }
	s := NewServer(ServerConfig{Logger: quietLogger()})
	s.Handle(codeInline, answer)
	s.Handle(codeGo, func(req *Request) *Command {
		req.Go(func(ctx context.Context) *Command {
			time.Sleep(jitter(req.Cmd.Opaque))
			return answer(req)
		})
		return nil
	})
	s.Handle(codeAsync, func(req *Request) *Command {
		reply, ok := req.Async()
		if !ok {
			return nil
		}
		go func() {
			time.Sleep(jitter(req.Cmd.Opaque))
			reply(answer(req))
		}()
		return nil
	})
	addr := startServer(t, s)
	rng := rand.New(rand.NewPCG(1, 2))
	type want struct {
		ch chan *Command
		op int32
		n  int
	}
	for conn := 0; conn < 3; conn++ {
		c := dialTest(t, addr)
		var buf []byte
		var wants []want
		for i := 0; i < 300; i++ {
			code := []int16{codeInline, codeGo, codeAsync}[rng.IntN(3)]
			n := rng.IntN(2000)
			if rng.IntN(10) == 0 {
				n = rng.IntN(300 << 10)
			}
			cmd := &Command{Code: code, Opaque: c.opaque.Add(1), Language: "GO", Version: 317, ExtFields: Fields{{"n", strconv.Itoa(n)}}}
			ch := make(chan *Command, 1)
			c.mu.Lock()
			c.waiters[cmd.Opaque] = ch
			c.mu.Unlock()
			wants = append(wants, want{ch, cmd.Opaque, n})
			buf = cmd.AppendFrame(buf)
			if rng.IntN(8) == 0 {
				c.write(buf)
				buf = nil
			}
		}
		c.write(buf)
		for _, w := range wants {
			select {
			case r := <-w.ch:
				if r.Code != Success || !bytes.Equal(r.Body, body(w.op, w.n)) {
					t.Fatalf("conn %d, request %d: code %d, %d-byte body that does not match (want %d bytes)", conn, w.op, r.Code, len(r.Body), w.n)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("conn %d, request %d: no answer (client read error: %v)", conn, w.op, c.err)
			}
		}
	}
}
