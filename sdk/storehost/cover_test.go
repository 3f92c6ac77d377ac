package storehost

import (
	"context"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
)

// coverState is a replication report: AckedOffset acked, and replicas
// id→AckOffset, in sync unless listed in behind, disconnected ones left out.
func coverState(acked int64, reps map[string]int64, behind ...string) sdk.ReplicationState {
	st := sdk.ReplicationState{AckedOffset: acked}
	for id, off := range reps {
		r := sdk.ReplicaState{ID: id, Addr: id, AckOffset: off, Connected: true, InSync: true}
		for _, b := range behind {
			if b == id {
				r.InSync = false
			}
		}
		if r.InSync {
			st.InSync++
		}
		st.Replicas = append(st.Replicas, r)
	}
	return st
}

// noAnswer fails if got delivers a status within 50 ms.
func noAnswer(t *testing.T, got <-chan AckStatus, what string) {
	t.Helper()
	select {
	case st := <-got:
		t.Fatalf("%s: Ack answered %v", what, st)
	case <-time.After(50 * time.Millisecond):
	}
}

// answer is the status got delivers within d (failing the test, naming
// what, if none comes).
func answer(t *testing.T, got <-chan AckStatus, d time.Duration, what string) AckStatus {
	t.Helper()
	select {
	case st := <-got:
		return st
	case <-time.After(d):
		t.Fatalf("%s: Ack never answered", what)
	}
	return 0
}

// TestCoverageRule: under a policy with a Cover, an ack needs every named
// replica (refused at once when one is not connected and in sync, held
// back while one lags even when the replicator's AckedOffset passed the
// record), and AtLeast replicas whichever they are.
func TestCoverageRule(t *testing.T) {
	const ms = time.Millisecond
	fewer := sdk.ReplicationPolicy{WaitReplicas: 2, Timeout: 150 * ms, AllowFewer: true, MinReplicas: 1}
	for _, tc := range []struct {
		name  string
		req   CoverRequirement
		state func(end int64) sdk.ReplicationState
		want  AckStatus
		now   bool // AckNow answers
	}{
		{name: "the named replica holds it", req: CoverRequirement{IDs: []string{"s1"}},
			state: func(end int64) sdk.ReplicationState { return coverState(end, map[string]int64{"s1": end}) },
			want:  AckOK, now: true},
		{name: "only an unnamed replica holds it: held back to the timeout", req: CoverRequirement{IDs: []string{"s1"}},
			state: func(end int64) sdk.ReplicationState {
				return coverState(end, map[string]int64{"s1": end - 1, "s2": end})
			},
			want: AckFlushSlaveTimeout},
		{name: "the named replica is not in sync: refused", req: CoverRequirement{IDs: []string{"s1"}},
			state: func(end int64) sdk.ReplicationState {
				return coverState(end, map[string]int64{"s1": end - 1, "s2": end}, "s1")
			},
			want: AckSlaveNotAvailable, now: true},
		{name: "the named replica is not connected: refused", req: CoverRequirement{IDs: []string{"s1"}},
			state: func(end int64) sdk.ReplicationState { return coverState(end, map[string]int64{"s2": end}) },
			want:  AckSlaveNotAvailable, now: true},
		{name: "at least two, two hold it", req: CoverRequirement{AtLeast: 2},
			state: func(end int64) sdk.ReplicationState {
				return coverState(end, map[string]int64{"s1": end, "s2": end + 5})
			},
			want: AckOK, now: true},
		{name: "at least two, one connected: refused", req: CoverRequirement{AtLeast: 2},
			state: func(end int64) sdk.ReplicationState { return coverState(end, map[string]int64{"s2": end}) },
			want:  AckSlaveNotAvailable, now: true},
		{name: "nothing named: the replicator's rule alone", req: CoverRequirement{},
			state: func(end int64) sdk.ReplicationState { return coverState(end, map[string]int64{"s2": end}) },
			want:  AckOK, now: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			h := New(s, nil)
			c := &Coverage{}
			h.SetCover(c, tc.req)
			p := NewAckPolicy(sdk.FlushPolicy{}, fewer)
			p.Cover = c
			end := s.Positions().Committed
			if err := h.ReportReplication(context.Background(), tc.state(end)); err != nil {
				t.Fatal(err)
			}
			if st, ok := h.AckNow(p, end); ok != tc.now || (ok && st != tc.want) {
				t.Fatalf("AckNow = %v, %v; want answered=%v, %v", st, ok, tc.now, tc.want)
			}
			got := make(chan AckStatus, 2)
			h.Ack(p, end, func(st AckStatus) { got <- st })
			if st := answer(t, got, 5*time.Second, tc.name); st != tc.want {
				t.Fatalf("Ack = %v, want %v", st, tc.want)
			}
		})
	}
}

// TestCoverageFollowsReportsAndChanges: a waiting ack is released by the
// report that brings the named replica to the record, not by the earlier
// one that brought only the replicator's AckedOffset there; and a replica
// named while the ack waits must hold it too.
func TestCoverageFollowsReportsAndChanges(t *testing.T) {
	s := testStore(t)
	h := New(s, nil)
	c := &Coverage{}
	h.SetCover(c, CoverRequirement{IDs: []string{"s1"}})
	p := NewAckPolicy(sdk.FlushPolicy{}, sdk.ReplicationPolicy{WaitReplicas: 2, Timeout: 5 * time.Second, AllowFewer: true, MinReplicas: 1})
	p.Cover = c
	end := s.Positions().Committed
	report := func(st sdk.ReplicationState) {
		t.Helper()
		if err := h.ReportReplication(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	report(coverState(0, map[string]int64{"s1": 0, "s2": 0}))
	got := make(chan AckStatus, 2)
	h.Ack(p, end, func(st AckStatus) { got <- st })
	report(coverState(end, map[string]int64{"s1": end - 10, "s2": end}))
	noAnswer(t, got, "AckedOffset past the record, s1 not")
	h.SetCover(c, CoverRequirement{IDs: []string{"s1", "s2"}})
	report(coverState(end, map[string]int64{"s1": end, "s2": end - 1})) // s2 fell back (a reconnect)
	noAnswer(t, got, "s1 holds it, s2 (named meanwhile) not")
	if got := h.Covered(p); got != end-1 {
		t.Fatalf("Covered = %d, want %d (s2's AckOffset)", got, end-1)
	}
	report(coverState(end, map[string]int64{"s1": end, "s2": end}))
	if st := answer(t, got, 5*time.Second, "every named replica holds the record"); st != AckOK {
		t.Fatalf("Ack = %v, want SEND_OK", st)
	}
	noAnswer(t, got, "done called twice")
}

// TestSetCoverReleasesWithoutAReport: a waiting ack whose requirement is
// relaxed (a replica left it) is released at once, with no further
// replication report.
func TestSetCoverReleasesWithoutAReport(t *testing.T) {
	s := testStore(t)
	h := New(s, nil)
	c := &Coverage{}
	h.SetCover(c, CoverRequirement{IDs: []string{"s1", "s2"}})
	p := NewAckPolicy(sdk.FlushPolicy{}, sdk.ReplicationPolicy{WaitReplicas: 2, Timeout: 5 * time.Second, AllowFewer: true, MinReplicas: 1})
	p.Cover = c
	end := s.Positions().Committed
	if err := h.ReportReplication(context.Background(), coverState(end, map[string]int64{"s1": end, "s2": end - 1})); err != nil {
		t.Fatal(err)
	}
	got := make(chan AckStatus, 1)
	h.Ack(p, end, func(st AckStatus) { got <- st })
	noAnswer(t, got, "s2 lacks the record")
	h.SetCover(c, CoverRequirement{IDs: []string{"s1"}})
	if st := answer(t, got, 2*time.Second, "the relaxed requirement"); st != AckOK {
		t.Fatalf("Ack = %v, want SEND_OK", st)
	}
}
