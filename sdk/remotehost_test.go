package sdk

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

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
	h := newRemoteHost(nil, lane, nil)
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
