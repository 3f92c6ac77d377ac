package replication

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/keelmq/keel/sdk/metricset"
)

// counters are the Node's process-lifetime counts, in its metric set.
type counters struct {
	bytesSent, bytesReceived, bytesPulled *vm.Counter
	reconnects, authFailures, rejected    *vm.Counter
	truncations                           *vm.Counter
}

// Families the role-dependent writer writes: a master's, then a slave's.
var roleFamilies = []struct{ name, typ, help string }{
	{"keel_replication_fenced", "gauge", "1 while the master refuses writes (behind a replica)"},
	{"keel_replication_in_sync", "gauge", "replicas in the in-sync set"},
	{"keel_replication_acked_offset", "gauge", "offset acknowledged by the required replicas"},
	{"keel_replication_replica_lag_bytes", "gauge", "bytes the replica is behind the master's committed offset"},
	{"keel_replication_replica_lag_seconds", "gauge", "age of the oldest record the replica has not acknowledged"},
	{"keel_replication_replica_ack_offset", "gauge", "the replica's acknowledged offset"},
	{"keel_replication_replica_in_sync", "gauge", "1 if the replica is in the in-sync set"},
	{"keel_replication_slave_connected", "gauge", "1 while the slave streams from its master"},
	{"keel_replication_slave_lag_bytes", "gauge", "bytes this slave is behind its master (as of the last heartbeat)"},
}

// newMetrics registers n's series and fills n.met.
func newMetrics(n *Node) *metricset.Set {
	s := metricset.New()
	s.Gauge("keel_replication_master", "1 if this node is the replication master", func() float64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return float64(boolInt(n.role == RoleMaster))
	})
	n.met = counters{
		bytesSent:     s.Counter("keel_replication_bytes_sent_total", "log bytes streamed to replicas"),
		bytesReceived: s.Counter("keel_replication_bytes_received_total", "log bytes received from the master"),
		bytesPulled:   s.Counter("keel_replication_catchup_bytes_total", "log bytes a master pulled from a replica that was ahead of it"),
		reconnects:    s.Counter("keel_replication_reconnects_total", "slave reconnect attempts"),
		authFailures:  s.Counter("keel_replication_auth_failures_total", "HA peers refused by authentication"),
		rejected:      s.Counter("keel_replication_rejected_acks_total", "replicas disconnected for acknowledging beyond the master's log"),
		truncations:   s.Counter("keel_replication_truncations_total", "divergent tails this slave cut at the consistent point"),
	}
	for _, f := range roleFamilies {
		s.Describe(f.name, f.typ, f.help)
	}
	s.Writer(n.writeRoleMetrics)
	return s
}

// writeRoleMetrics writes the series of the role n has now: a master's
// state and one series per replica and family, or a slave's link.
func (n *Node) writeRoleMetrics(w io.Writer) {
	n.mu.Lock()
	m, s := n.m, n.s
	n.mu.Unlock()
	if m != nil {
		st := m.snapshot()
		vm.WriteGaugeUint64(w, "keel_replication_fenced", uint64(boolInt(st.Fenced)))
		vm.WriteGaugeUint64(w, "keel_replication_in_sync", uint64(st.InSync))
		vm.WriteGaugeUint64(w, "keel_replication_acked_offset", uint64(st.AckedOffset))
		reps := slices.Clone(st.Replicas)
		sort.Slice(reps, func(i, j int) bool { return reps[i].ID < reps[j].ID })
		series := func(family string, id, addr string) string {
			return fmt.Sprintf("%s{replica=%q,addr=%q}", family, id, addr)
		}
		for _, r := range reps {
			vm.WriteGaugeUint64(w, series("keel_replication_replica_lag_bytes", r.ID, r.Addr), uint64(r.LagBytes))
		}
		for _, r := range reps {
			vm.WriteGaugeFloat64(w, series("keel_replication_replica_lag_seconds", r.ID, r.Addr), r.LagSeconds)
		}
		for _, r := range reps {
			vm.WriteGaugeUint64(w, series("keel_replication_replica_ack_offset", r.ID, r.Addr), uint64(r.AckOffset))
		}
		for _, r := range reps {
			vm.WriteGaugeUint64(w, series("keel_replication_replica_in_sync", r.ID, r.Addr), uint64(boolInt(r.InSync)))
		}
	}
	if s != nil {
		st := s.status()
		vm.WriteGaugeUint64(w, "keel_replication_slave_connected", uint64(boolInt(st["connected"] == true)))
		lag, _ := st["lag_bytes"].(int64)
		vm.WriteGaugeUint64(w, "keel_replication_slave_lag_bytes", uint64(lag))
	}
}

// WriteMetrics implements sdk.MetricsWriter (Prometheus text format).
func (n *Node) WriteMetrics(ctx context.Context) ([]byte, error) {
	return n.metrics.Bytes(), nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
