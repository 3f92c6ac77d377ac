package host

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// clusterReportOf calls the GET /admin/cluster handler of n and decodes
// its answer; it returns the status code too.
func clusterReportOf(t *testing.T, n *Node) (int, ClusterReport) {
	t.Helper()
	rec := httptest.NewRecorder()
	(&adminAPI{n: n}).cluster(rec, httptest.NewRequest(http.MethodGet, "/admin/cluster", nil))
	var r ClusterReport
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatalf("/admin/cluster answered %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, r
}

// clusterMetricsOf writes n's cluster series and parses them.
func clusterMetricsOf(t *testing.T, n *Node) []promSample {
	t.Helper()
	var buf bytes.Buffer
	writeClusterMetrics(&buf, n)
	s, err := parsePrometheusText(buf.String())
	if err != nil {
		t.Fatalf("cluster metrics are not valid Prometheus text: %v\n%s", err, buf.String())
	}
	return s
}

// TestAdminClusterReportAndMetrics: a controller node and a group of two
// cluster-mode brokers. The controller node's /admin/cluster shows the
// group with the first broker master, both members and, once the slave
// caught up, both in the SyncStateSet; each broker shows its own id, role
// and lease; the broker-side metrics say the same. A node in neither
// mode answers 404 and writes no cluster series.
func TestAdminClusterReportAndMetrics(t *testing.T) {
	ctl := startControllerNode(t)
	a := startClusterNode(t, clusterBrokerSets(ctl, t.TempDir(), freeAddr(t))...)
	b := startClusterNode(t, clusterBrokerSets(ctl, t.TempDir(), freeAddr(t))...)
	idA, idB := a.cluster.brokerID(), b.cluster.brokerID()
	if idA == 0 || idB == 0 || idA == idB {
		t.Fatalf("broker ids %d and %d, want two distinct registered ids", idA, idB)
	}
	// Both views: b learns the set at its own next heartbeat, and the
	// report and metrics below read each broker's own view.
	waitUntil(t, 10*time.Second, "b in the SyncStateSet as both brokers see it, and a leased", func() bool {
		_, ga, _ := a.cluster.state()
		_, gb, _ := b.cluster.state()
		return len(ga.SyncStateSet) == 2 && len(gb.SyncStateSet) == 2 && gb.MasterEpoch == ga.MasterEpoch && a.cluster.leased()
	})

	code, r := clusterReportOf(t, ctl)
	if code != http.StatusOK || r.Controller == nil || r.Broker != nil {
		t.Fatalf("controller node: %d %+v, want 200 with the controller's view only", code, r)
	}
	cv := r.Controller
	if !cv.IsLeader || cv.LeaderID != ctl.prof.Controller.NodeID || cv.LeaderID != cv.NodeID || cv.LeaderAddr != ctl.Addr("controller") {
		t.Errorf("controller view %+v, want this node (%s at %s) leading", cv, ctl.prof.Controller.NodeID, ctl.Addr("controller"))
	}
	if len(cv.Groups) != 1 {
		t.Fatalf("controller view has %d groups, want 1: %+v", len(cv.Groups), cv.Groups)
	}
	g := cv.Groups[0]
	if g.BrokerName != a.prof.Server.BrokerName || g.Cluster != a.prof.Server.Cluster || g.MasterID != idA || g.MasterEpoch < 1 ||
		g.MasterAddr != a.advertised() || g.MasterHAAddr != a.prof.Server.HAAddr || !slices.Equal(g.SyncStateSet, []int64{idA, idB}) ||
		g.SyncStateSetEpoch < 1 || len(g.Members) != 2 {
		t.Errorf("group %+v, want master %d at %s, SyncStateSet [%d %d], two members", g, idA, a.advertised(), idA, idB)
	}
	if m, ok := g.Member(idB); !ok || m.Addr != b.advertised() {
		t.Errorf("member %d = %+v %v, want at %s", idB, m, ok, b.advertised())
	}

	code, r = clusterReportOf(t, a)
	if code != http.StatusOK || r.Broker == nil || r.Controller != nil {
		t.Fatalf("master broker: %d %+v, want 200 with the broker's view only", code, r)
	}
	if br := r.Broker; br.BrokerID != idA || br.Role != roleMaster || !br.GroupKnown || br.Group == nil || br.Group.MasterID != idA ||
		!br.Leased || br.Lease != "2s" || br.LastContact == nil || br.Writable != "yes" {
		t.Errorf("master's view %+v, want id %d, master, leased for 2s, writable", br, idA)
	}
	_, r = clusterReportOf(t, b)
	if br := r.Broker; br == nil || br.BrokerID != idB || br.Role != roleSlave || br.Group == nil || br.Group.MasterID != idA || br.Leased {
		t.Errorf("slave's view %+v, want id %d, slave of %d, not leased", br, idB, idA)
	}

	for _, tc := range []struct {
		n    *Node
		want map[string]float64
	}{
		{a, map[string]float64{"keel_cluster_broker_id": float64(idA), "keel_cluster_is_master": 1, "keel_cluster_master_epoch": float64(g.MasterEpoch),
			"keel_cluster_sync_state_set_size": 2, "keel_cluster_lease_ok": 1}},
		{b, map[string]float64{"keel_cluster_broker_id": float64(idB), "keel_cluster_is_master": 0, "keel_cluster_master_epoch": float64(g.MasterEpoch),
			"keel_cluster_sync_state_set_size": 2, "keel_cluster_lease_ok": 0}},
	} {
		s := clusterMetricsOf(t, tc.n)
		labels := map[string]string{"cluster": tc.n.prof.Server.Cluster, "broker": tc.n.prof.Server.BrokerName}
		for name, want := range tc.want {
			if v, ok := sampleOf(s, name, labels); !ok || v != want {
				t.Errorf("broker %d: %s%v = %v %v, want %v", tc.n.cluster.brokerID(), name, labels, v, ok, want)
			}
		}
	}
	if s := clusterMetricsOf(t, ctl); len(s) != 0 {
		t.Errorf("a node not in cluster mode wrote cluster series %v", s)
	}

	single := startTestNode(t)
	if code, _ := clusterReportOf(t, single); code != http.StatusNotFound {
		t.Errorf("a single node's /admin/cluster answered %d, want 404", code)
	}
}
