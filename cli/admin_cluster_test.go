package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/host/namesrv"
	"github.com/keelmq/keel/host/remoting"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// unusedAddr is a 127.0.0.1 address nothing listens on now.
func unusedAddr(t *testing.T) string {
	l := listen(t)
	defer l.Close()
	return l.Addr().String()
}

// serveOn serves rs on l until the test ends.
func serveOn(t *testing.T, rs *remoting.Server, l net.Listener) string {
	go rs.Serve(l)
	t.Cleanup(func() { rs.Close() })
	return l.Addr().String()
}

// startController runs a one-node controller group on 127.0.0.1 and
// returns its remoting address once it leads.
func startController(t *testing.T) (string, *controller.Controller) {
	t.Helper()
	l := listen(t)
	raftAddr := unusedAddr(t)
	ctl, err := controller.New(controller.Config{
		NodeID: "c1", RaftAddr: raftAddr, RemotingAddr: l.Addr().String(), Dir: filepath.Join(t.TempDir(), "c1"),
		Peers: []controller.Peer{{ID: "c1", Addr: raftAddr}}, HeartbeatTimeout: 1500 * time.Millisecond,
		RaftTimeout: 500 * time.Millisecond, Logger: quietLog(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := remoting.NewServer(remoting.ServerConfig{Logger: quietLog()})
	ctl.Register(rs)
	addr := serveOn(t, rs, l)
	if err := ctl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	waitFor(t, "the controller to lead", func() bool { _, a := ctl.Leader(); return ctl.IsLeader() && a != "" })
	return addr, ctl
}

// startBrokerAgent registers a broker (addresses only: no broker runs
// there) with the controller and heartbeats for it until the test ends.
func startBrokerAgent(t *testing.T, ctlAddr string, k controller.GroupKey, addr, ha string) *controller.Agent {
	t.Helper()
	cl, err := controller.NewClient([]string{ctlAddr}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := controller.NewAgent(controller.AgentConfig{
		Client:       cl,
		Registration: controller.Registration{Group: k, Addr: addr, HAAddr: ha, NodeID: "node-" + addr},
		Interval:     100 * time.Millisecond, Timeout: 1500 * time.Millisecond,
		Position: func() (int32, int64, int64) { return 0, 0, 0 },
		Logger:   quietLog(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ag.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	waitFor(t, "the agent of "+addr+" to register", func() bool { return ag.BrokerID() != 0 })
	return ag
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runAdminCluster runs `keel admin cluster ARGS` and returns what it
// printed.
func runAdminCluster(args ...string) (string, error) {
	var out bytes.Buffer
	a := &app{stdout: &out}
	err := a.adminCluster(args)
	return out.String(), err
}

// fields rewrites text with each line's fields separated by one blank,
// so tests do not depend on tabwriter's column widths.
func fields(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// TestAdminClusterStatusAndElect runs status and elect against a real
// controller and a real name server: group broker-a with a master and a
// slave in its SyncStateSet, both listed by the name server, and group
// legacy only the name server knows.
func TestAdminClusterStatusAndElect(t *testing.T) {
	ctlAddr, _ := startController(t)
	k := controller.GroupKey{Cluster: "C", BrokerName: "broker-a"}
	a := startBrokerAgent(t, ctlAddr, k, "10.0.0.1:10911", "10.0.0.1:10912")
	waitFor(t, "a master", func() bool { g, ok := a.Group(); return ok && g.MasterID == a.BrokerID() })
	b := startBrokerAgent(t, ctlAddr, k, "10.0.0.2:10911", "")
	idA, idB := a.BrokerID(), b.BrokerID()
	cl, err := controller.NewClient([]string{ctlAddr}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	g, _ := a.Group()
	if _, err := cl.AlterSyncStateSet(context.Background(), k, idA, g.MasterEpoch, []int64{idA, idB}, g.SyncStateSetEpoch); err != nil {
		t.Fatal(err)
	}

	ns := namesrv.New(namesrv.Config{Logger: quietLog()})
	nrs := remoting.NewServer(remoting.ServerConfig{Logger: quietLog()})
	ns.Register(nrs)
	nsAddr := serveOn(t, nrs, listen(t))
	for _, r := range []namesrv.Registration{
		{Cluster: "C", BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911", BrokerID: namesrv.MasterID},
		{Cluster: "C", BrokerName: "broker-a", BrokerAddr: "10.0.0.2:10911", BrokerID: idB},
		{Cluster: "C", BrokerName: "broker-a", BrokerAddr: "10.0.0.9:10911", BrokerID: 7},
		{Cluster: "C", BrokerName: "legacy", BrokerAddr: "10.0.0.3:10911", BrokerID: namesrv.MasterID},
	} {
		if _, err := ns.RegisterBroker(r); err != nil {
			t.Fatal(err)
		}
	}

	out, err := runAdminCluster("status", "--controller", unusedAddr(t)+","+ctlAddr, "--namesrv", nsAddr)
	if err != nil {
		t.Fatal(err)
	}
	want := "CONTROLLER LEADER: c1 at " + ctlAddr + " (peers: c1-" + "RAFT" + ")\n\n" +
		"GROUP MASTER_ID MASTER_ADDR MASTER_EPOCH SYNC_STATE_SET SYNC_STATE_SET_EPOCH\n" +
		"C/broker-a 1 10.0.0.1:10911 1 1,2 2\n" +
		"C/legacy unknown to the controller\n\n" +
		"GROUP ID ADDR HA_ADDR ROLE IN_SYNC NAMESRV_ID\n" +
		"C/broker-a 1 10.0.0.1:10911 10.0.0.1:10912 master yes 0\n" +
		"C/broker-a 2 10.0.0.2:10911 - slave yes 2\n" +
		"C/broker-a - 10.0.0.9:10911 - not a member - 7\n" +
		"C/legacy - 10.0.0.3:10911 - not a member - 0\n"
	got := fields(out)
	if i, j := strings.Index(got, "(peers: c1-"), strings.Index(got, ")\n"); i >= 0 && j > i { // the raft address is the test's
		got = got[:i] + "(peers: c1-RAFT" + got[j:]
	}
	if idA != 1 || idB != 2 || got != want {
		t.Errorf("status printed (ids %d, %d)\n%s\nwant\n%s", idA, idB, got, want)
	}

	out, err = runAdminCluster("status", "--controller", ctlAddr, "--group", "broker-a")
	if err != nil {
		t.Fatal(err)
	}
	if got := fields(out); !strings.Contains(got, "broker-a 1 10.0.0.1:10911 1 1,2 2\n") ||
		!strings.Contains(got, "GROUP ID ADDR HA_ADDR ROLE IN_SYNC\n") || strings.Contains(got, "NAMESRV_ID") {
		t.Errorf("status --group without --namesrv printed\n%s", got)
	}

	out, err = runAdminCluster("elect", "--controller", ctlAddr, "--group", "C/broker-a", "--broker-id", "2")
	if err != nil {
		t.Fatal(err)
	}
	if got := fields(out); !strings.Contains(got, "C/broker-a 2 10.0.0.2:10911 2 2 3\n") || !strings.Contains(got, "C/broker-a 1 10.0.0.1:10911 10.0.0.1:10912 slave no\n") ||
		!strings.Contains(got, "C/broker-a 2 10.0.0.2:10911 - master yes\n") {
		t.Errorf("elect printed\n%s", got)
	}
	// The new master starts a SyncStateSet of itself.
	if g, err := cl.GetReplicaInfo(context.Background(), k); err != nil || g.MasterID != idB || g.MasterEpoch != 2 || len(g.SyncStateSet) != 1 {
		t.Errorf("after elect the controller holds %+v, %v; want master %d at epoch 2 alone in the SyncStateSet", g, err, idB)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--controller", unusedAddr(t)}, "no controller answered"},
		{[]string{"status", "--controller", ctlAddr, "--group", "C/nope"}, "no broker group nope in cluster C"},
		{[]string{"elect", "--controller", ctlAddr, "--group", "C/nope", "--broker-id", "1"}, "no broker group nope in cluster C"},
		{[]string{"elect", "--controller", ctlAddr, "--group", "C/broker-a", "--broker-id", "9"}, "broker not alive"},
		{[]string{"elect", "--controller", ctlAddr, "--group", "C/broker-a"}, "--broker-id N (a member's id, from 1) is required"},
		{[]string{"elect", "--controller", ctlAddr, "--broker-id", "1"}, "--group names one group (got 0)"},
		{[]string{"status", "--group", "broker-a"}, "--controller is required"},
		{[]string{"status", "--controller", ctlAddr, "--group", "/broker-a"}, `--group "/broker-a": want [CLUSTER/]NAME`},
		{[]string{"status", "--controller", ctlAddr, "--namesrv", unusedAddr(t)}, "cluster info from name server"},
		{[]string{"status", "--controller", ctlAddr, "extra"}, `unexpected argument "extra"`},
	} {
		if _, err := runAdminCluster(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
