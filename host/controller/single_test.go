package controller

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// TestSingleNodeRestart: one controller works alone; designated elections
// follow the SyncStateSet; the state survives a restart from a snapshot
// plus the log after it.
func TestSingleNodeRestart(t *testing.T) {
	nodes := startCluster(t, 1)
	n := leaderOf(t, nodes, 10*time.Second)
	ctx := context.Background()
	k := GroupKey{"c1", "broker-a"}
	a1 := newTestBroker(t, []string{n.addr}, k, "a1", 10)
	a2 := newTestBroker(t, []string{n.addr}, k, "a2", 5)
	a1.beat()
	a2.beat()
	g := waitMaster(t, a1.cl, k, a1.id, 5*time.Second)

	if _, err := a1.cl.ElectMaster(ctx, k, 0, false); !isErr(err, ErrMasterStillExist) {
		t.Fatalf("election with a live master: %v, want ErrMasterStillExist", err)
	}
	if _, err := a1.cl.ElectMaster(ctx, k, a2.id, true); !isErr(err, ErrElectMasterFailed) {
		t.Fatalf("designating a broker outside the SyncStateSet: %v, want ErrElectMasterFailed", err)
	}
	if _, err := a1.cl.ElectMaster(ctx, k, 99, true); !isErr(err, ErrBrokerNotAlive) {
		t.Fatalf("designating an unknown broker: %v, want ErrBrokerNotAlive", err)
	}
	if _, err := a1.cl.Heartbeat(ctx, Heartbeat{Group: k, BrokerID: 99}); !isErr(err, ErrNeedRegister) {
		t.Fatalf("heartbeat of an unregistered id: %v, want ErrNeedRegister", err)
	}
	if _, err := a1.cl.AlterSyncStateSet(ctx, k, a1.id, g.MasterEpoch, []int64{a2.id}, g.SyncStateSetEpoch); !isErr(err, ErrInvalidReplicas) {
		t.Fatalf("a set without the master: %v, want ErrInvalidReplicas", err)
	}
	if _, err := a1.cl.AlterSyncStateSet(ctx, k, a1.id, g.MasterEpoch, []int64{a1.id, a2.id}, g.SyncStateSetEpoch+1); !isErr(err, ErrFencedSyncStateSetEpoch) {
		t.Fatalf("a set from a stale set epoch: %v, want ErrFencedSyncStateSetEpoch", err)
	}
	if _, err := a1.cl.AlterSyncStateSet(ctx, k, a1.id, g.MasterEpoch, []int64{a1.id, a2.id}, g.SyncStateSetEpoch); err != nil {
		t.Fatal(err)
	}
	g, err := a1.cl.ElectMaster(ctx, k, a2.id, true)
	if err != nil || g.MasterID != a2.id || g.MasterEpoch != 2 {
		t.Fatalf("designated election of a2: %+v, %v", g, err)
	}

	checkWire(t, n.addr, k, a2.id, a1.id)

	if err := n.ctrl.raft.Load().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	kb := GroupKey{"c2", "broker-a"} // same broker name, another cluster
	newTestBroker(t, []string{n.addr}, kb, "b1", 0)
	if _, err := a1.cl.GetReplicaInfo(ctx, GroupKey{BrokerName: "broker-a"}); !isErr(err, ErrInvalidRequest) {
		t.Fatalf("an ambiguous broker name: %v, want ErrInvalidRequest", err)
	}
	before := n.ctrl.Groups()

	a1.close()
	a2.close()
	n.stop()
	n.start()
	leaderOf(t, nodes, 10*time.Second)
	if got := n.ctrl.Groups(); !slices.EqualFunc(got, before, groupsEqual) {
		t.Fatalf("after restart\n%+v\nwant\n%+v", got, before)
	}
	// Registration ids persist: a1 gets id 1 again.
	cl, err := NewClient([]string{n.addr}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id, _, err := cl.Register(ctx, a1.reg)
	if err != nil || id != a1.id {
		t.Fatalf("re-registering a1 after the restart: %d, %v", id, err)
	}
}

// TestClientNoController: a call with every controller down fails within
// the client's timeout, naming the cause.
func TestClientNoController(t *testing.T) {
	if _, err := NewClient(nil, time.Second); err == nil {
		t.Fatal("NewClient accepted no addresses")
	}
	cl, err := NewClient([]string{freeAddr(t), freeAddr(t)}, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	_, err = cl.GetReplicaInfo(context.Background(), GroupKey{"c", "b"})
	if err == nil || !isErr(err, errConnBroken) {
		t.Fatalf("GetReplicaInfo with no controller: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v with a 500ms timeout", took)
	}
}

// checkWire sends raw requests: bad input gets CONTROLLER_INVALID_REQUEST
// naming the field; CONTROLLER_GET_SYNC_STATE_DATA answers RocketMQ's
// BrokerReplicasInfo shape.
func checkWire(t *testing.T, addr string, k GroupKey, master, slave int64) {
	t.Helper()
	ctx := context.Background()
	call := func(code int16, fields map[string]string, body []byte) *remoting.Command {
		resp, err := remoting.Call(ctx, addr, &remoting.Command{Code: code, ExtFields: remoting.FieldsOf(fields), Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, bad := range []struct {
		code   int16
		fields map[string]string
		body   string
		remark string
	}{
		{remoting.CodeControllerRegisterBroker, map[string]string{"clusterName": "c", "brokerName": "b"}, "", "brokerAddress"},
		{remoting.CodeBrokerHeartbeat, map[string]string{"clusterName": "c", "brokerName": "b", "brokerId": "x"}, "", "brokerId"},
		{remoting.CodeControllerAlterSyncStateSet, map[string]string{"brokerName": k.BrokerName, "masterBrokerId": "1", "masterEpoch": "2"}, "{", "body"},
		{remoting.CodeControllerElectMaster, map[string]string{"brokerName": k.BrokerName, "designateElect": "true"}, "", "brokerId"},
		{remoting.CodeControllerGetSyncStateData, nil, "nope", "JSON list"},
	} {
		resp := call(bad.code, bad.fields, []byte(bad.body))
		if resp.Code != remoting.ControllerInvalidRequest || !strings.Contains(resp.Remark, bad.remark) {
			t.Errorf("code %d with %v: answered %d %q, want %d naming %s", bad.code, bad.fields, resp.Code, resp.Remark, remoting.ControllerInvalidRequest, bad.remark)
		}
	}
	resp := call(remoting.CodeControllerGetSyncStateData, map[string]string{"clusterName": k.Cluster}, []byte(`["`+k.BrokerName+`"]`))
	var info brokerReplicasInfo
	if err := json.Unmarshal(resp.Body, &info); err != nil || resp.Code != remoting.Success {
		t.Fatalf("sync state data: %d %q %v", resp.Code, resp.Remark, err)
	}
	ri := info.ReplicasInfoTable[k.BrokerName]
	if ri.MasterBrokerID != master || len(ri.InSyncReplicas) != 1 || ri.InSyncReplicas[0].BrokerID != master ||
		!ri.InSyncReplicas[0].Alive || len(ri.NotInSyncReplicas) != 1 || ri.NotInSyncReplicas[0].BrokerID != slave {
		t.Fatalf("sync state data of %s: %+v", k, ri)
	}
	resp = call(remoting.CodeControllerGetMetadataInfo, nil, nil)
	if resp.Ext("isLeader") != "true" || resp.Ext("controllerLeaderAddress") != addr {
		t.Fatalf("metadata: %v", resp.ExtFields)
	}
}
