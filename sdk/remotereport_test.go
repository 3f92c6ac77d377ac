package sdk

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
)

// slowReports is a Host service whose ReportReplication takes a while
// and records what arrives, in order.
type slowReports struct {
	pluginpb.UnimplementedHostServer
	mu   sync.Mutex
	got  []*pluginpb.ReplicationState
	wait time.Duration
	fail int // the next fail calls answer Unavailable
}

func (s *slowReports) ReportReplication(_ context.Context, r *pluginpb.ReplicationState) (*pluginpb.Empty, error) {
	time.Sleep(s.wait)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return nil, pluginwire.ToStatus(ErrUnavailable)
	}
	s.got = append(s.got, r)
	return &pluginpb.Empty{}, nil
}

func (s *slowReports) Log(context.Context, *pluginpb.LogBatch) (*pluginpb.Empty, error) {
	return &pluginpb.Empty{}, nil
}

func (s *slowReports) received() []*pluginpb.ReplicationState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pluginpb.ReplicationState(nil), s.got...)
}

// TestReportsOverTheLane: a report that changes the fence has reached
// the host when it returns, after every earlier report; progress reports
// in between coalesce to the newest, which the host gets.
func TestReportsOverTheLane(t *testing.T) {
	srv := &slowReports{wait: 5 * time.Millisecond}
	h := laneHost(t, srv)
	ctx := context.Background()

	if err := h.ReportReplication(ctx, ReplicationState{Fenced: true, Reason: "starting"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.received(); len(got) != 1 || !got[0].GetFenced() {
		t.Fatalf("the first report (a fence) had not arrived when it returned: %v", got)
	}
	if err := h.ReportReplication(ctx, ReplicationState{}); err != nil {
		t.Fatal(err)
	}
	if got := srv.received(); len(got) != 2 || got[1].GetFenced() {
		t.Fatalf("the unfencing report had not arrived when it returned: %v", got)
	}
	const n = 200
	for i := 1; i <= n; i++ {
		if err := h.ReportReplication(ctx, ReplicationState{AckedOffset: int64(i), InSync: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.ReportReplication(ctx, ReplicationState{AckedOffset: n, Fenced: true, Reason: "behind a replica"}); err != nil {
		t.Fatal(err)
	}
	got := srv.received()
	last := got[len(got)-1]
	if !last.GetFenced() || last.GetReason() != "behind a replica" {
		t.Fatalf("the fence was not the last report to arrive: %v", last)
	}
	progress := got[2 : len(got)-1]
	if len(progress) == 0 || progress[len(progress)-1].GetAckedOffset() != n {
		t.Fatalf("the newest progress report (%d) did not arrive before the fence: %v", n, progress)
	}
	if len(progress) >= n {
		t.Errorf("%d progress reports sent for %d made: none coalesced", len(progress), n)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].GetAckedOffset() <= progress[i-1].GetAckedOffset() {
			t.Fatalf("progress reports out of order: %v", progress)
		}
	}
}

// TestFailedReportsAreRetried: a background report the host failed is
// sent again (the replicator counts it as made and may not report again
// on an idle log), and a failed fence change makes the next report
// synchronous whatever its fence.
func TestFailedReportsAreRetried(t *testing.T) {
	srv := &slowReports{}
	h := laneHost(t, srv)
	ctx := context.Background()
	if err := h.ReportReplication(ctx, ReplicationState{}); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	srv.fail = 2
	srv.mu.Unlock()
	if err := h.ReportReplication(ctx, ReplicationState{AckedOffset: 7}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := srv.received()
		if len(got) == 2 && got[1].GetAckedOffset() == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed background report never arrived: %v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A fence change whose send fails: the next report, with the same
	// fence, is synchronous (it has arrived when it returns).
	srv.mu.Lock()
	srv.fail = 1
	srv.mu.Unlock()
	if err := h.ReportReplication(ctx, ReplicationState{AckedOffset: 7, Fenced: true, Reason: "r"}); err == nil {
		t.Fatal("a failed synchronous report returned nil")
	}
	if err := h.ReportReplication(ctx, ReplicationState{AckedOffset: 8, Fenced: true, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.received(); len(got) != 3 || !got[2].GetFenced() || got[2].GetAckedOffset() != 8 {
		t.Fatalf("after a failed fence change the next report was not synchronous: %v", got)
	}
}
