package controller

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// TestClusterFailover runs three controllers and two broker groups of
// master + slave: first elections, a master whose heartbeats stop, a
// master whose connection closes, a master failure while the raft leader
// is killed, a follower's redirect, a stale master's refused alter, and a
// controller restarted from its Dir.
func TestClusterFailover(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := leaderOf(t, nodes, 10*time.Second)
	addrs := addrsOf(nodes)
	ctx := context.Background()

	ka, kb := GroupKey{"c1", "broker-a"}, GroupKey{"c1", "broker-b"}
	a1 := newTestBroker(t, addrs, ka, "a1", 100)
	a2 := newTestBroker(t, addrs, ka, "a2", 50)
	b1 := newTestBroker(t, addrs, kb, "b1", 70)
	b2 := newTestBroker(t, addrs, kb, "b2", 20)
	if a1.id != 1 || a2.id != 2 || b1.id != 1 || b2.id != 2 {
		t.Fatalf("broker ids %d %d %d %d, want 1 2 1 2", a1.id, a2.id, b1.id, b2.id)
	}
	again, _, err := a1.cl.Register(ctx, a1.reg)
	if err != nil || again != a1.id {
		t.Fatalf("re-registering a1: id %d, %v; want %d", again, err, a1.id)
	}
	for _, b := range []*testBroker{a1, a2, b1, b2} {
		b.beat()
	}
	admin, err := NewClient(addrs, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	// First elections: every member is a candidate, the most data wins.
	ga := waitMaster(t, admin, ka, a1.id, 5*time.Second)
	gb := waitMaster(t, admin, kb, b1.id, 5*time.Second)
	if ga.MasterEpoch != 1 || !slices.Equal(ga.SyncStateSet, []int64{a1.id}) || len(ga.Members) != 2 {
		t.Fatalf("group a after the first election: %+v", ga)
	}
	a1.epoch.Store(ga.MasterEpoch)
	b1.epoch.Store(gb.MasterEpoch)

	// The masters grow their SyncStateSets.
	if _, err := a1.cl.AlterSyncStateSet(ctx, ka, a1.id, ga.MasterEpoch, []int64{a1.id, a2.id}, ga.SyncStateSetEpoch); err != nil {
		t.Fatal(err)
	}
	if _, err := b1.cl.AlterSyncStateSet(ctx, kb, b1.id, gb.MasterEpoch, []int64{b1.id, b2.id}, gb.SyncStateSetEpoch); err != nil {
		t.Fatal(err)
	}
	ga = replica(t, admin, ka)
	if !slices.Equal(ga.SyncStateSet, []int64{1, 2}) || ga.SyncStateSetEpoch != 2 {
		t.Fatalf("group a after alter: %+v", ga)
	}
	if _, err := a2.cl.AlterSyncStateSet(ctx, ka, a2.id, ga.MasterEpoch, []int64{a2.id}, ga.SyncStateSetEpoch); !isErr(err, ErrInvalidMaster) {
		t.Fatalf("a slave's alter: %v, want ErrInvalidMaster", err)
	}

	// A follower redirects to the leader.
	for _, n := range nodes {
		if n == leader {
			continue
		}
		resp, err := remoting.Call(ctx, n.addr, &remoting.Command{Code: remoting.CodeControllerGetReplicaInfo,
			ExtFields: remoting.FieldsOf(map[string]string{"brokerName": ka.BrokerName})})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != remoting.ControllerNotLeader || resp.Ext("controllerLeaderAddress") != leader.addr {
			t.Fatalf("follower %s answered %d %q leader %q, want %d naming %s", n.cfg.NodeID, resp.Code, resp.Remark,
				resp.Ext("controllerLeaderAddress"), remoting.ControllerNotLeader, leader.addr)
		}
	}
	// A client that knows only a follower follows the redirect.
	for _, n := range nodes {
		if n == leader {
			continue
		}
		cl, err := NewClient([]string{n.addr}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		g, err := cl.GetReplicaInfo(ctx, ka)
		cl.Close()
		if err != nil || g.MasterID != a1.id {
			t.Fatalf("through follower %s: %+v, %v", n.cfg.NodeID, g, err)
		}
		break
	}
	md, err := admin.Metadata(ctx)
	if err != nil || md.LeaderAddr != leader.addr || md.LeaderID != leader.cfg.NodeID || strings.Count(md.Peers, ";") != 2 {
		t.Fatalf("metadata %+v, %v; leader %s at %s", md, err, leader.cfg.NodeID, leader.addr)
	}

	// 1. a1's heartbeats stop: a2 is elected within the timeout and two scans.
	stopped := time.Now()
	a1.paused.Store(true)
	ga = waitMaster(t, admin, ka, a2.id, testHeartbeatTimeout+2*testScanInterval+time.Second)
	if took := time.Since(stopped); took < testHeartbeatTimeout-testBeatEvery {
		t.Fatalf("a2 elected %v after a1's last heartbeat, before the %v timeout", took, testHeartbeatTimeout)
	}
	if ga.MasterEpoch != 2 || !slices.Equal(ga.SyncStateSet, []int64{a2.id}) {
		t.Fatalf("group a after failover: %+v", ga)
	}
	a2.epoch.Store(ga.MasterEpoch)
	// The stale master's alter is refused.
	if _, err := a1.cl.AlterSyncStateSet(ctx, ka, a1.id, 1, []int64{a1.id}, 2); !isErr(err, ErrFencedMasterEpoch) {
		t.Fatalf("stale master's alter: %v, want ErrFencedMasterEpoch", err)
	}

	// 2. b1's connection closes: b2 is elected once b1's lease has surely
	// run out (ClosedMasterDead after its last heartbeat), before the
	// heartbeat timeout, never while b1 may still acknowledge.
	closed := time.Now()
	b1.close()
	gb = waitMaster(t, admin, kb, b2.id, ClosedMasterDead(testHeartbeatTimeout)+2*testScanInterval+time.Second)
	if gb.MasterEpoch != 2 {
		t.Fatalf("group b after the connection closed: %+v (in %v)", gb, time.Since(closed))
	}
	if took := time.Since(closed); took < Lease(testHeartbeatTimeout)-testBeatEvery {
		t.Fatalf("b2 elected %v after b1's connection closed, while b1 could still hold its %v lease", took, Lease(testHeartbeatTimeout))
	}
	eventually(t, 2*testBeatEvery+time.Second, "b2 told by its heartbeat that it is master", func() bool { return b2.told.Load() == b2.id })

	// 3. a2 fails while the raft leader is killed: the new leader elects a1.
	a1.paused.Store(false)
	a1.epoch.Store(2)
	if _, err := a2.cl.AlterSyncStateSet(ctx, ka, a2.id, ga.MasterEpoch, []int64{a1.id, a2.id}, ga.SyncStateSetEpoch); err != nil {
		t.Fatal(err)
	}
	a2.paused.Store(true)
	leader.stop()
	var rest []*testNode
	for _, n := range nodes {
		if n.ctrl != nil {
			rest = append(rest, n)
		}
	}
	newLeader := leaderOf(t, rest, 10*time.Second)
	ga = waitMaster(t, admin, ka, a1.id, testHeartbeatTimeout+10*testScanInterval+5*time.Second)
	if ga.MasterEpoch != 3 {
		t.Fatalf("group a after the leader change: %+v", ga)
	}
	var prom bytes.Buffer
	newLeader.ctrl.Metrics().WritePrometheus(&prom)
	if !strings.Contains(prom.String(), "keel_controller_elections_total 1") {
		t.Fatalf("new leader's metrics:\n%s", prom.String())
	}

	// 4. The killed controller restarts from its Dir and its state is back.
	leader.start()
	eventually(t, 10*time.Second, "restarted controller's state", func() bool {
		g, ok := leader.ctrl.Group(ka)
		return ok && g.MasterID == a1.id && g.MasterEpoch == 3
	})
	if got, want := leader.ctrl.Groups(), newLeader.ctrl.Groups(); !slices.EqualFunc(got, want, groupsEqual) {
		t.Fatalf("restarted controller's groups\n%+v\nwant\n%+v", got, want)
	}
}

func groupsEqual(a, b Group) bool {
	return a.GroupKey == b.GroupKey && a.MasterID == b.MasterID && a.MasterEpoch == b.MasterEpoch &&
		a.SyncStateSetEpoch == b.SyncStateSetEpoch && slices.Equal(a.SyncStateSet, b.SyncStateSet) &&
		slices.Equal(a.Members, b.Members) && a.NextID == b.NextID
}
