package host

import (
	"fmt"
	"io"
)

// writeClusterMetrics writes a cluster-mode broker's series, labelled
// with its group (cluster, broker), each family with its TYPE line:
//
//	keel_cluster_broker_id             the id the controller gave this broker (0 before it registered)
//	keel_cluster_is_master             1 when this broker is in the master role now
//	keel_cluster_master_epoch          the group's master epoch as the controller last answered
//	keel_cluster_sync_state_set_size   members in the group's SyncStateSet, as last answered
//	keel_cluster_lease_ok              1 when the controller lists this broker as master and answered within the lease
//
// It writes nothing on a node not in cluster mode. The controller's own
// series (keel_controller_*) are writeControllerMetrics'.
func writeClusterMetrics(w io.Writer, n *Node) {
	c := n.cluster
	if c == nil {
		return
	}
	id, g, _ := c.state()
	labels := fmt.Sprintf("{cluster=%q,broker=%q}", c.key.Cluster, c.key.BrokerName)
	for _, s := range []struct {
		name string
		v    int64
	}{
		{"keel_cluster_broker_id", id},
		{"keel_cluster_is_master", int64(b2i(!n.slave.Load()))},
		{"keel_cluster_master_epoch", int64(g.MasterEpoch)},
		{"keel_cluster_sync_state_set_size", int64(len(g.SyncStateSet))},
		{"keel_cluster_lease_ok", int64(b2i(c.leased()))},
	} {
		fmt.Fprintf(w, "# TYPE %s gauge\n%s%s %d\n", s.name, s.name, labels, s.v)
	}
}
