package sdk

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/keelmq/keel/internal/commitpage"
	"github.com/keelmq/keel/internal/pluginlane"
	"github.com/keelmq/keel/internal/pluginpb"
)

// committedHost serves the committed offset two ways: AwaitCommitted
// (unless old, a host from before it) and the WatchCommitted stream.
type committedHost struct {
	pluginpb.UnimplementedHostServer
	old       bool
	committed atomic.Int64
	awaits    atomic.Int64
}

func (c *committedHost) wait(ctx context.Context, after int64) (int64, error) {
	for {
		if v := c.committed.Load(); v > after {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (c *committedHost) AwaitCommitted(ctx context.Context, r *pluginpb.Offset) (*pluginpb.Offset, error) {
	if c.old {
		return c.UnimplementedHostServer.AwaitCommitted(ctx, r)
	}
	c.awaits.Add(1)
	v, err := c.wait(ctx, r.GetOffset())
	return &pluginpb.Offset{Offset: v}, err
}

func (c *committedHost) WatchCommitted(r *pluginpb.Offset, s grpc.ServerStreamingServer[pluginpb.Offset]) error {
	after := r.GetOffset()
	for {
		v, err := c.wait(s.Context(), after)
		if err != nil {
			return err
		}
		if err := s.Send(&pluginpb.Offset{Offset: v}); err != nil {
			return err
		}
		after = v
	}
}

func (c *committedHost) Log(context.Context, *pluginpb.LogBatch) (*pluginpb.Empty, error) {
	return &pluginpb.Empty{}, nil
}

// laneHost is a remote host whose lane reaches srv; the lane, its server
// and the host's goroutines end with the test.
func laneHost(t *testing.T, srv pluginpb.HostServer) *remoteHost {
	return laneHostPage(t, srv, nil)
}

// laneHostPage is laneHost with a committed-offset page.
func laneHostPage(t *testing.T, srv pluginpb.HostServer, page *commitpage.Reader) *remoteHost {
	t.Helper()
	ls, err := pluginlane.NewServer(t.TempDir(), &pluginpb.Host_ServiceDesc, srv)
	if err != nil {
		t.Fatal(err)
	}
	go ls.Serve(10 * time.Second)
	t.Cleanup(func() { ls.Close() })
	lane, err := pluginlane.Dial(context.Background(), ls.Addr(), ls.Token())
	if err != nil {
		t.Fatal(err)
	}
	h := newRemoteHost(nil, lane, nil, page)
	t.Cleanup(func() {
		h.cancel()
		h.watchWG.Wait()
		lane.Close()
	})
	return h
}

// TestWaitCommittedOverTheLane: a wait the cache cannot answer is one
// AwaitCommitted call, answered when the offset grows; a host without
// AwaitCommitted is waited on through the watch instead.
func TestWaitCommittedOverTheLane(t *testing.T) {
	for _, old := range []bool{false, true} {
		srv := &committedHost{old: old}
		srv.committed.Store(100)
		h := laneHost(t, srv)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if v, err := h.WaitCommitted(ctx, 50); err != nil || v != 100 {
			t.Fatalf("old=%v: WaitCommitted(50) = %d, %v", old, v, err)
		}
		done := make(chan int64, 1)
		go func() {
			v, err := h.WaitCommitted(ctx, 100)
			if err != nil {
				t.Error(err)
			}
			done <- v
		}()
		time.Sleep(20 * time.Millisecond)
		select {
		case v := <-done:
			t.Fatalf("old=%v: WaitCommitted(100) returned %d before the offset grew", old, v)
		default:
		}
		srv.committed.Store(180)
		if v := <-done; v != 180 {
			t.Fatalf("old=%v: WaitCommitted(100) = %d, want 180", old, v)
		}
		// The cache answers what it can without a call.
		before := srv.awaits.Load()
		if v, err := h.WaitCommitted(ctx, 150); err != nil || v != 180 {
			t.Fatalf("old=%v: WaitCommitted(150) = %d, %v", old, v, err)
		}
		if n := srv.awaits.Load() - before; n != 0 {
			t.Errorf("old=%v: a wait the cache answers made %d calls", old, n)
		}
		if !old && srv.awaits.Load() != 2 {
			t.Errorf("%d AwaitCommitted calls, want 2", srv.awaits.Load())
		}
		cancel()
	}
}

// TestWaitCommittedFromThePage: with a committed-offset page, a wait the
// page answers makes no call; one it cannot answer (nothing new, or this
// plugin's truncation running) is an AwaitCommitted call.
func TestWaitCommittedFromThePage(t *testing.T) {
	w, err := commitpage.Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := commitpage.Open(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	srv := &committedHost{}
	srv.committed.Store(300)
	w.Store(300)
	h := laneHostPage(t, srv, r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if v, err := h.WaitCommitted(ctx, 250); err != nil || v != 300 {
		t.Fatalf("WaitCommitted(250) = %d, %v", v, err)
	}
	if n := srv.awaits.Load(); n != 0 {
		t.Fatalf("a wait the page answers made %d AwaitCommitted calls", n)
	}
	done := make(chan int64, 1)
	go func() {
		v, err := h.WaitCommitted(ctx, 300)
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	time.Sleep(20 * time.Millisecond)
	srv.committed.Store(400)
	w.Store(400)
	if v := <-done; v != 400 {
		t.Fatalf("WaitCommitted(300) = %d, want 400", v)
	}
	if n := srv.awaits.Load(); n != 1 {
		t.Fatalf("a wait past the page made %d AwaitCommitted calls, want 1", n)
	}
	// While this plugin truncates, the page is not believed.
	h.wmu.Lock()
	h.cutting++
	_, ok := h.pageLocked()
	h.cutting--
	h.wmu.Unlock()
	if ok {
		t.Fatal("the page answered during a truncation")
	}
}
