package host

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/profile"
	replicationsync "github.com/keelmq/keel/plugins/replication-sync"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

type storehostAckStatus = storehost.AckStatus

// freeAddr is a 127.0.0.1 address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startClusterNode starts a node from the empty profile plus sets (no
// test defaults: the caller names every address), stopped at the end.
func startClusterNode(t *testing.T, sets ...string) *Node {
	t.Helper()
	return startClusterNodeWith(t, testCatalog(), sets)
}

// startSyncClusterNode is startClusterNode with the sync replicator
// available (Stop may come before the end).
func startSyncClusterNode(t *testing.T, sets []string) *Node {
	t.Helper()
	return startClusterNodeWith(t, clusterCatalog(), sets)
}

// startClusterNodeWith starts a node from the empty profile plus sets,
// with the plugins of cat, stopped at the end.
func startClusterNodeWith(t *testing.T, cat *Catalog, sets []string) *Node {
	t.Helper()
	p, err := profile.LoadBytes("cluster.toml", []byte("schema = 1\n"), sets)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	n, err := Start(ctx, p, Options{Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})), Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	return n
}

// clusterBrokerSets is the profile of a cluster-mode broker of group
// DefaultCluster/keel-broker-a (the defaults) registering with ctl's name
// server and controller, its store in dir, replication on ha.
func clusterBrokerSets(ctl *Node, dir, ha string) []string {
	return []string{`server.roles=["broker"]`, `server.namesrv_addrs=["` + ctl.Addr("namesrv") + `"]`,
		`controller.addrs=["` + ctl.Addr("controller") + `"]`, "server.broker_addr=127.0.0.1:0",
		"server.ha_addr=" + ha, "admin.addr=127.0.0.1:0", "store.dir=" + dir, "store.segment_size=1MiB",
		"store.max_message_size=64KiB", "index.plugin=none", "flush.plugin=async", "replication.plugin=async",
		"replication.config.heartbeat_interval=100ms", "replication.config.reconnect_backoff_max=200ms",
		"store.disk_max_used_ratio=0.97", "store.disk_clean_forcibly_ratio=0.98", "store.disk_warning_ratio=0.99"}
}

// startControllerNode starts a node running a name server and a
// one-node controller group.
func startControllerNode(t *testing.T) *Node {
	t.Helper()
	return startClusterNode(t, `server.roles=["namesrv","controller"]`, "server.namesrv_addr=127.0.0.1:0",
		"controller.addr=127.0.0.1:0", "controller.raft_addr="+freeAddr(t), "admin.addr=127.0.0.1:0",
		"store.dir="+t.TempDir())
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterModeElectsFollowsAndFailsOver: a name server with a
// controller, and two brokers of one group in cluster mode. The first
// broker is elected master, the second follows it; when the master stops,
// the controller elects the slave, which takes writes; the old master,
// restarted on its store, comes back as the new master's slave and
// receives what was written meanwhile. Routes follow each change.
func TestClusterModeElectsFollowsAndFailsOver(t *testing.T) {
	ctl := startControllerNode(t)
	broker := func(dir, ha string) []string { return clusterBrokerSets(ctl, dir, ha) }
	dirA, dirB := t.TempDir(), t.TempDir()
	haA, haB := freeAddr(t), freeAddr(t)
	a := startClusterNode(t, broker(dirA, haA)...)
	if a.currentRole() != roleMaster {
		t.Fatalf("the first broker of a group is %s, want master", a.currentRole())
	}
	b := startClusterNode(t, broker(dirB, haB)...)
	if b.currentRole() != roleSlave {
		t.Fatalf("the second broker is %s, want slave", b.currentRole())
	}
	waitUntil(t, 10*time.Second, "a to take writes", func() bool { return a.WriteRefusal() == "yes" })
	for i := 0; i < 20; i++ {
		if _, err := a.store.Append(&record.Message{Topic: "ClusterT", Body: []byte("before")}); err != nil {
			t.Fatal(err)
		}
	}
	end := a.store.Positions().Committed
	waitUntil(t, 10*time.Second, "b to hold a's log", func() bool { return b.store.Positions().Committed == end })
	waitUntil(t, 10*time.Second, "b in a's SyncStateSet", func() bool {
		_, g, _ := a.cluster.state()
		return len(g.SyncStateSet) == 2
	})
	waitUntil(t, 5*time.Second, "routes to list a at id 0 and b at its id", func() bool {
		bs := ctl.nsrv.Brokers()
		return len(bs) == 2 && ((bs[0].BrokerID == 0) != (bs[1].BrokerID == 0))
	})

	stopped := time.Now()
	a.Stop(context.Background())
	waitUntil(t, 10*time.Second, "b to be elected and take writes", func() bool { return b.currentRole() == roleMaster && b.WriteRefusal() == "yes" })
	t.Logf("failover: b took writes %v after a stopped", time.Since(stopped).Round(time.Millisecond))
	for i := 0; i < 10; i++ {
		if _, err := b.store.Append(&record.Message{Topic: "ClusterT", Body: []byte("after")}); err != nil {
			t.Fatal(err)
		}
	}

	a2 := startClusterNode(t, broker(dirA, haA)...)
	if a2.currentRole() != roleSlave {
		t.Fatalf("the old master came back as %s, want slave", a2.currentRole())
	}
	end = b.store.Positions().Committed
	waitUntil(t, 10*time.Second, "the old master to hold the new master's log", func() bool { return a2.store.Positions().Committed == end })
	if _, err := a2.Promote(context.Background()); err == nil {
		t.Fatal("a manual promotion in cluster mode was accepted")
	}
}

// clusterCatalog is testCatalog with the sync replicator.
func clusterCatalog() *Catalog {
	c := testCatalog()
	c.Add(sdk.KindReplication, "sync", func() sdk.Plugin { return replicationsync.New() })
	return c
}

// TestClusterMinInSyncAcksAloneOnlyAfterTheControllerShrinks: under sync
// replication with min_in_sync_replicas = 0, a master whose slave stops
// acknowledges alone, but only once the controller has committed the
// SyncStateSet without the slave: before that, sends answer
// SLAVE_NOT_AVAILABLE.
func TestClusterMinInSyncAcksAloneOnlyAfterTheControllerShrinks(t *testing.T) {
	ctl := startControllerNode(t)
	broker := func(dir, ha string) []string {
		return append(clusterBrokerSets(ctl, dir, ha), "replication.plugin=sync",
			"replication.config.min_in_sync_replicas=0", "replication.config.max_lag_time=300ms")
	}
	a := startSyncClusterNode(t, broker(t.TempDir(), freeAddr(t)))
	b := startSyncClusterNode(t, broker(t.TempDir(), freeAddr(t)))
	ack := func() storehostAckStatus {
		st, _ := appendAndAck(t, a, "ClusterMin")
		return st
	}
	waitUntil(t, 10*time.Second, "a writable with b in its SyncStateSet", func() bool {
		_, g, _ := a.cluster.state()
		return a.WriteRefusal() == "yes" && len(g.SyncStateSet) == 2 && a.host.InSync() == 1
	})
	if st := ack(); st.String() != "SEND_OK" {
		t.Fatalf("with the slave in sync: %v", st)
	}
	b.Stop(context.Background())
	var sawRefusal bool
	waitUntil(t, 10*time.Second, "a to ack alone", func() bool {
		st := ack()
		if st.String() == "SEND_OK" && a.host.InSync() == 0 {
			// The controller's own state (the broker's view may lag).
			g, _ := ctl.ctl.Group(a.cluster.key)
			if len(g.SyncStateSet) != 1 {
				t.Fatalf("acked alone while the controller's SyncStateSet is still %v", g.SyncStateSet)
			}
			return true
		}
		if st.String() == "SLAVE_NOT_AVAILABLE" {
			sawRefusal = true
		}
		return false
	})
	t.Logf("refused before the shrink was committed: %v", sawRefusal)
}
