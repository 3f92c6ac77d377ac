package pluginlane

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
)

// fakeHost serves a few Host methods for the lane's tests.
type fakeHost struct {
	pluginpb.UnimplementedHostServer
	mu        sync.Mutex
	appended  [][]byte
	committed chan int64 // WatchCommitted sends what arrives here
	watchEnd  chan error // ... and ends with what arrives here
	blocked   chan error // FlushAfter returns its context's error here
}

func (f *fakeHost) Positions(context.Context, *pluginpb.Empty) (*pluginpb.Positions, error) {
	return &pluginpb.Positions{Committed: 42, Min: 7}, nil
}

func (f *fakeHost) AppendLog(_ context.Context, r *pluginpb.AppendLogRequest) (*pluginpb.Empty, error) {
	if r.GetOffset() < 0 {
		return nil, pluginwire.ToStatus(pluginwire.ErrOffset)
	}
	f.mu.Lock()
	f.appended = append(f.appended, r.GetData())
	f.mu.Unlock()
	return &pluginpb.Empty{}, nil
}

func (f *fakeHost) FlushAfter(ctx context.Context, _ *pluginpb.Offset) (*pluginpb.Offset, error) {
	<-ctx.Done()
	f.blocked <- ctx.Err()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (f *fakeHost) WatchCommitted(_ *pluginpb.Offset, s grpc.ServerStreamingServer[pluginpb.Offset]) error {
	for {
		select {
		case c := <-f.committed:
			if err := s.Send(&pluginpb.Offset{Offset: c}); err != nil {
				return err
			}
		case err := <-f.watchEnd:
			return err
		case <-s.Context().Done():
			f.blocked <- s.Context().Err()
			return s.Context().Err()
		}
	}
}

// pair starts a server for f and a client connected to it.
func pair(t *testing.T, f *fakeHost) (*Server, pluginpb.HostClient, *Conn) {
	t.Helper()
	s, err := NewServer(t.TempDir(), &pluginpb.Host_ServiceDesc, f)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(10 * time.Second) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	c, err := Dial(context.Background(), s.Addr(), s.Token())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return s, pluginpb.NewHostClient(c), c
}

func newFake() *fakeHost {
	return &fakeHost{committed: make(chan int64, 16), watchEnd: make(chan error, 1), blocked: make(chan error, 4)}
}

func TestUnaryCallsAndErrors(t *testing.T) {
	f := newFake()
	s, hc, _ := pair(t, f)
	ctx := context.Background()
	p, err := hc.Positions(ctx, &pluginpb.Empty{})
	if err != nil || p.GetCommitted() != 42 || p.GetMin() != 7 {
		t.Fatalf("Positions = %v, %v", p, err)
	}
	big := bytes.Repeat([]byte("x"), 3<<20) // larger than the 64 KiB buffers
	if _, err := hc.AppendLog(ctx, &pluginpb.AppendLogRequest{Offset: 1, Data: big}); err != nil {
		t.Fatal(err)
	}
	if got := f.appended[0]; !bytes.Equal(got, big) {
		t.Fatalf("appended %d bytes, want %d", len(got), len(big))
	}
	// A sentinel keeps its identity across the lane, as across gRPC.
	_, err = hc.AppendLog(ctx, &pluginpb.AppendLogRequest{Offset: -1})
	if !errors.Is(pluginwire.FromStatus(err), pluginwire.ErrOffset) {
		t.Fatalf("AppendLog(-1) = %v, want ErrOffset", err)
	}
	// A method the server does not implement.
	if _, err := hc.Epochs(ctx, &pluginpb.Empty{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Epochs = %v, want Unimplemented", err)
	}
	if s.Calls() != 4 {
		t.Errorf("Calls = %d, want 4", s.Calls())
	}
}

func TestConcurrentCalls(t *testing.T) {
	f := newFake()
	_, hc, _ := pair(t, f)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if _, err := hc.AppendLog(context.Background(), &pluginpb.AppendLogRequest{Offset: int64(i), Data: []byte{byte(i), byte(j)}}); err != nil {
					errs <- err
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(f.appended) != 64*50 {
		t.Fatalf("%d appends arrived, want %d", len(f.appended), 64*50)
	}
}

func TestDeadlineAndCancelReachTheServer(t *testing.T) {
	f := newFake()
	_, hc, _ := pair(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := hc.FlushAfter(ctx, &pluginpb.Offset{Offset: 1})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("FlushAfter past its deadline = %v", err)
	}
	if got := <-f.blocked; got == nil {
		t.Fatal("the server's context did not end")
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel2() }()
	if _, err := hc.FlushAfter(ctx2, &pluginpb.Offset{Offset: 1}); status.Code(err) != codes.Canceled {
		t.Fatalf("FlushAfter cancelled = %v", err)
	}
	select {
	case <-f.blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancel did not reach the server")
	}
}

func TestServerStream(t *testing.T) {
	f := newFake()
	_, hc, _ := pair(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := hc.WatchCommitted(ctx, &pluginpb.Offset{Offset: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []int64{10, 20, 30} {
		f.committed <- c
	}
	for _, want := range []int64{10, 20, 30} {
		m, err := st.Recv()
		if err != nil || m.GetOffset() != want {
			t.Fatalf("Recv = %v, %v; want %d", m, err, want)
		}
	}
	// The server ends the stream with a status.
	f.watchEnd <- pluginwire.ToStatus(pluginwire.ErrUnavailable)
	if _, err := st.Recv(); !errors.Is(pluginwire.FromStatus(err), pluginwire.ErrUnavailable) {
		t.Fatalf("Recv after the end = %v, want ErrUnavailable", err)
	}
	// A stream the client abandons ends on the server.
	st2, err := hc.WatchCommitted(ctx, &pluginpb.Offset{Offset: -1})
	if err != nil {
		t.Fatal(err)
	}
	f.committed <- 40
	if m, err := st2.Recv(); err != nil || m.GetOffset() != 40 {
		t.Fatalf("Recv = %v, %v", m, err)
	}
	cancel()
	select {
	case <-f.blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned stream did not end on the server")
	}
	// A stream that ends cleanly reads io.EOF.
	st3, err := hc.WatchCommitted(context.Background(), &pluginpb.Offset{Offset: -1})
	if err != nil {
		t.Fatal(err)
	}
	f.watchEnd <- nil
	if _, err := st3.Recv(); err != io.EOF {
		t.Fatalf("Recv after a clean end = %v, want io.EOF", err)
	}
}

func TestConnectionLossFailsCallsUnavailable(t *testing.T) {
	f := newFake()
	s, hc, _ := pair(t, f)
	done := make(chan error, 1)
	go func() {
		_, err := hc.FlushAfter(context.Background(), &pluginpb.Offset{Offset: 1})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(pluginwire.FromStatus(err), pluginwire.ErrUnavailable) {
			t.Fatalf("call in flight = %v, want ErrUnavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight did not end")
	}
	if _, err := hc.Positions(context.Background(), &pluginpb.Empty{}); !errors.Is(pluginwire.FromStatus(err), pluginwire.ErrUnavailable) {
		t.Fatalf("call after the loss = %v, want ErrUnavailable", err)
	}
}

// serving starts a server for a fresh fake; Serve's result arrives on
// the channel.
func serving(t *testing.T) (*Server, chan error) {
	t.Helper()
	s, err := NewServer(t.TempDir(), &pluginpb.Host_ServiceDesc, newFake())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	served := make(chan error, 1)
	go func() { served <- s.Serve(10 * time.Second) }()
	return s, served
}

func TestWrongTokenRefused(t *testing.T) {
	s, served := serving(t)
	if _, err := Dial(context.Background(), s.Addr(), []byte("not the token")); err == nil {
		t.Fatal("Dial with a wrong token succeeded")
	}
	if err := <-served; err == nil {
		t.Fatal("Serve accepted a wrong token without an error")
	}
	// One connection only: the socket is gone.
	if _, err := net.Dial("unix", s.Addr()); err == nil {
		t.Fatal("the socket still accepts connections")
	}
}

func TestMalformedFrameEndsTheConnection(t *testing.T) {
	s, served := serving(t)
	nc, err := net.Dial("unix", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w := newWriter(nc)
	if err := w.send(frameHello, 0, s.Token()); err != nil {
		t.Fatal(err)
	}
	if err := w.send(frameCall, 1, []byte{200}); err != nil { // a 200-byte name that is not there
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err == nil {
			t.Fatal("Serve returned no error for a malformed call")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a malformed call did not end the connection")
	}
}

// TestUnknownStreamIsUnimplemented: a stream the server does not serve
// reads as codes.Unimplemented (sdk.ErrNotSupported), not an internal
// error.
func TestUnknownStreamIsUnimplemented(t *testing.T) {
	_, _, c := pair(t, newFake())
	st, err := c.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, "/keel.plugin.v1.Host/NoSuchStream")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(&pluginpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(&pluginpb.Offset{}); !errors.Is(pluginwire.FromStatus(err), pluginwire.ErrNotSupported) {
		t.Fatalf("RecvMsg = %v, want ErrNotSupported", err)
	}
}
