package host

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// TestMemberReplicas: a member streams under its HA address; at an
// address registered twice (a wiped disk) only the newest member maps;
// the master itself and a member without an HA address do not.
func TestMemberReplicas(t *testing.T) {
	g := controller.Group{Members: []controller.Member{
		{ID: 1, HAAddr: "h1"}, // the master
		{ID: 2, HAAddr: "h2"}, // wiped: 4 runs at h2 now
		{ID: 3, HAAddr: "h3"}, //
		{ID: 4, HAAddr: "h2"}, //
		{ID: 5},               // no HA address
		{ID: 6, HAAddr: "h1"}, // a later member at the master's address
		{ID: 7, HAAddr: "h7", Addr: "x"},
	}}
	got := memberReplicas(g, 1)
	want := map[int64]string{3: "h3", 4: "h2", 6: "h1", 7: "h7"}
	if !maps.Equal(got, want) {
		t.Fatalf("memberReplicas = %v, want %v", got, want)
	}
	for replica, member := range map[string]int64{"h2": 4, "h3": 3, "nobody": 0} {
		if m := replicaMember(got, replica); m != member {
			t.Errorf("replicaMember(%q) = %d, want %d", replica, m, member)
		}
	}
}

// TestSyncStateSetsMaximal: the maximal set is the committed one with
// every proposal that may still commit on top of it; an accepted proposal
// newer than the heartbeat's view is the committed set; proposals on an
// older set epoch or master epoch are dropped.
func TestSyncStateSetsMaximal(t *testing.T) {
	c := &clusterMember{}
	g := controller.Group{MasterID: 1, MasterEpoch: 3, SyncStateSet: []int64{1, 2}, SyncStateSetEpoch: 5}
	c.pending = []pendingSet{
		{set: []int64{1, 2, 3}, base: 5, masterEpoch: 3},
		{set: []int64{1, 4}, base: 5, masterEpoch: 3},
		{set: []int64{1, 9}, base: 4, masterEpoch: 3}, // its epoch has passed
		{set: []int64{1, 8}, base: 5, masterEpoch: 2}, // an earlier mastership
	}
	committed, epoch, maximal := c.sets(g)
	if !slices.Equal(committed, []int64{1, 2}) || epoch != 5 || !slices.Equal(maximal, []int64{1, 2, 3, 4}) {
		t.Fatalf("sets = %v @%d, maximal %v; want [1 2] @5, maximal [1 2 3 4]", committed, epoch, maximal)
	}
	if len(c.pending) != 2 {
		t.Fatalf("%d proposals kept, want 2: %+v", len(c.pending), c.pending)
	}
	// Our proposal {1, 4} was accepted at epoch 6; the view still says 5.
	c.altered.set, c.altered.epoch, c.altered.masterEpoch = []int64{1, 4}, 6, 3
	committed, epoch, maximal = c.sets(g)
	if !slices.Equal(committed, []int64{1, 4}) || epoch != 6 || !slices.Equal(maximal, []int64{1, 4}) || len(c.pending) != 0 {
		t.Fatalf("after the accepted proposal: %v @%d, maximal %v, pending %+v; want [1 4] @6, maximal [1 4], none pending",
			committed, epoch, maximal, c.pending)
	}
}

// TestFewerRule: acks proceed with fewer replicas only while the
// committed set holds at least min_in_sync_replicas and fewer than
// wait_replicas replicas and every member of the maximal set maps to a
// replica; they must then be held by every replica of the maximal set.
// Otherwise wait_replicas replicas must hold them, and, with a set too
// small for the minimum or a member that maps to nothing, every replica
// of the maximal set that maps.
func TestFewerRule(t *testing.T) {
	reps := map[int64]string{2: "h2", 3: "h3", 4: "h4"} // 1 is the master; 5 maps to nothing
	p := sdk.ReplicationPolicy{WaitReplicas: 2, AllowFewer: true, MinReplicas: 1}
	for _, tc := range []struct {
		name               string
		master             bool
		committed, maximal []int64
		p                  sdk.ReplicationPolicy
		granted            bool
		want               storehost.CoverRequirement
	}{
		{"full set: counted", true, []int64{1, 2, 3}, []int64{1, 2, 3}, p, false, storehost.CoverRequirement{AtLeast: 2}},
		{"shrunk: every replica of the set", true, []int64{1, 2}, []int64{1, 2}, p, true, storehost.CoverRequirement{IDs: []string{"h2"}}},
		{"shrunk, expansion pending: the proposed replica too", true, []int64{1, 2}, []int64{1, 2, 3}, p, true,
			storehost.CoverRequirement{IDs: []string{"h2", "h3"}}},
		{"below the minimum: wait_replicas and the proposed one", true, []int64{1}, []int64{1, 4}, p, false,
			storehost.CoverRequirement{IDs: []string{"h4"}, AtLeast: 2}},
		{"minimum 0, master alone", true, []int64{1}, []int64{1}, sdk.ReplicationPolicy{WaitReplicas: 2, AllowFewer: true}, true,
			storehost.CoverRequirement{}},
		{"a member that maps to nothing", true, []int64{1, 5}, []int64{1, 5}, p, false, storehost.CoverRequirement{AtLeast: 2}},
		{"not the master", false, []int64{1, 2}, []int64{1, 2}, p, false, storehost.CoverRequirement{AtLeast: 2}},
	} {
		granted, req := fewerRule(1, tc.master, tc.committed, tc.maximal, reps, tc.p)
		slices.Sort(req.IDs)
		if granted != tc.granted || req.AtLeast != tc.want.AtLeast || !slices.Equal(req.IDs, tc.want.IDs) {
			t.Errorf("%s: fewerRule = %v, %+v; want %v, %+v", tc.name, granted, req, tc.granted, tc.want)
		}
	}
}

// TestCaughtUp: under a policy that waits for replicas, a replica may
// enter the SyncStateSet only once it is connected, in sync and holds
// everything the master may have acknowledged (the replicator's
// AckedOffset); without waiting, being connected and in sync suffices.
func TestCaughtUp(t *testing.T) {
	s, err := core.Open(core.Options{Dir: t.TempDir(), SegmentSize: 1 << 20, MaxMessageSize: 64 << 10, CQEntriesPerFile: 1024})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	for i := 0; i < 3; i++ {
		if _, err := s.Append(&record.Message{Topic: "T", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	end := s.Positions().Committed
	n := &Node{log: slog.Default(), store: s, host: storehost.New(s, nil)}
	n.setAckPolicy(sdk.ReplicationPolicy{WaitReplicas: 1}, nil)
	if err := n.host.ReportReplication(context.Background(), sdk.ReplicationState{AckedOffset: end - 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r    sdk.ReplicaState
		want bool
	}{
		{sdk.ReplicaState{AckOffset: end - 1, InSync: true, Connected: true}, true},
		{sdk.ReplicaState{AckOffset: end, InSync: true, Connected: true}, true},
		{sdk.ReplicaState{AckOffset: end - 2, InSync: true, Connected: true}, false}, // behind an acknowledged offset
		{sdk.ReplicaState{AckOffset: end, InSync: false, Connected: true}, false},
		{sdk.ReplicaState{AckOffset: end, InSync: true, Connected: false}, false},
	} {
		if got := n.caughtUp(tc.r); got != tc.want {
			t.Errorf("caughtUp(%+v) with AckedOffset %d = %v, want %v", tc.r, end-1, got, tc.want)
		}
	}
	n.setAckPolicy(sdk.ReplicationPolicy{}, nil) // acks wait for no replica
	if !n.caughtUp(sdk.ReplicaState{AckOffset: 0, InSync: true, Connected: true}) {
		t.Error("without waiting for replicas, an in-sync replica is not caught up")
	}
}
