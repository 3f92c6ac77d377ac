package replication_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
	"github.com/keelmq/keel/sdk/replication"
)

// quorum acknowledges what a majority of a replica set of Voters holds
// (2 of 3): the policy of a three-replica deployment that tolerates one
// replica down.
type quorum struct{ Voters int }

func (q quorum) Acknowledge(committed int64, rs []replication.Replica) replication.Verdict {
	var acks []int64
	for _, r := range rs {
		if r.InSync {
			acks = append(acks, r.Acked)
		}
	}
	v := replication.Verdict{InSync: len(acks)}
	if need := q.Voters/2 + 1; len(acks) >= need {
		slices.SortFunc(acks, func(a, b int64) int { return cmp.Compare(b, a) })
		v.Acked = acks[need-1]
	}
	return v
}

// zoneAware acknowledges what at least one in-sync replica in each of
// Zones distinct zones holds; a replica's zone is its node_id up to the
// first "/" ("a/10.0.0.7:10912"). Verdict.InSync counts zones, so with
// wait_replicas = Zones producers get SLAVE_NOT_AVAILABLE while a zone
// has no in-sync replica.
type zoneAware struct{ Zones int }

func (z zoneAware) Acknowledge(committed int64, rs []replication.Replica) replication.Verdict {
	best := map[string]int64{} // zone → its highest acknowledgement
	for _, r := range rs {
		zone, _, _ := strings.Cut(r.ID, "/")
		if a, ok := best[zone]; r.InSync && (!ok || r.Acked > a) {
			best[zone] = r.Acked
		}
	}
	acks := slices.SortedFunc(func(yield func(int64) bool) {
		for _, a := range best {
			if !yield(a) {
				return
			}
		}
	}, func(a, b int64) int { return cmp.Compare(b, a) })
	v := replication.Verdict{InSync: len(acks)}
	if len(acks) >= z.Zones && z.Zones > 0 {
		v.Acked = acks[z.Zones-1] // the best replica of each of the Zones best zones holds it
	}
	return v
}

func TestPolicies(t *testing.T) {
	rs := []replication.Replica{
		{ID: "a/1", Acked: 500, InSync: true},
		{ID: "a/2", Acked: 900, InSync: true},
		{ID: "b/3", Acked: 300, InSync: true},
		{ID: "b/4", Acked: 950, InSync: false}, // lagging: not counted
	}
	for _, c := range []struct {
		name string
		p    replication.Policy
		rs   []replication.Replica
		want replication.Verdict
	}{
		{"default 1", replication.InSyncReplicas{N: 1}, rs, replication.Verdict{Acked: 900, InSync: 3}},
		{"default 0 counts as 1", replication.InSyncReplicas{}, rs, replication.Verdict{Acked: 900, InSync: 3}},
		{"default 3", replication.InSyncReplicas{N: 3}, rs, replication.Verdict{Acked: 300, InSync: 3}},
		{"default 4 of 3 in sync", replication.InSyncReplicas{N: 4}, rs, replication.Verdict{Acked: 0, InSync: 3}},
		{"quorum 2 of 3", quorum{Voters: 3}, rs, replication.Verdict{Acked: 500, InSync: 3}},
		{"quorum, one in sync", quorum{Voters: 3}, rs[2:], replication.Verdict{Acked: 0, InSync: 1}},
		{"zones 2", zoneAware{Zones: 2}, rs, replication.Verdict{Acked: 300, InSync: 2}},
		{"zones 2, zone b lagging", zoneAware{Zones: 2}, []replication.Replica{rs[0], rs[1], rs[3]}, replication.Verdict{Acked: 0, InSync: 1}},
		{"no replica", replication.InSyncReplicas{N: 1}, nil, replication.Verdict{}},
		{"fewer allowed: 2 of 3 wanted, min 1", replication.InSyncReplicas{N: 4, Fewer: true, Min: 1}, rs, replication.Verdict{Acked: 300, InSync: 3}},
		{"fewer allowed but below min", replication.InSyncReplicas{N: 4, Fewer: true, Min: 4}, rs, replication.Verdict{Acked: 0, InSync: 3}},
		{"fewer allowed, none in sync", replication.InSyncReplicas{N: 1, Fewer: true}, nil, replication.Verdict{}},
	} {
		if got := c.p.Acknowledge(1000, slices.Clone(c.rs)); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// policyNode is a replication.Node configured from the profile with the
// acknowledgement policy pol and, if zoneOf is set, a node_id prefixed
// by the zone zoneOf assigns its data directory.
type policyNode struct {
	*replication.Node
	pol    replication.Policy
	zoneOf func(dataDir string) string
}

func (n policyNode) Configure(ctx context.Context, cfg sdk.Config) error {
	var fc replication.FullConfig
	if err := replication.DecodeConfig(cfg, &fc); err != nil {
		return err
	}
	o := fc.Options()
	o.Policy = n.pol
	if n.zoneOf != nil {
		o.NodeID = n.zoneOf(cfg.DataDir) + "/" + cfg.Addr
	}
	return n.Setup(cfg, o)
}

// zoneBook assigns zones "a" and "b" alternately to data directories in
// the order it first sees them (a restarted node keeps its zone), so
// that any two slaves a cluster starts one after the other are in
// different zones.
type zoneBook struct {
	mu    sync.Mutex
	zones map[string]string
}

func (b *zoneBook) zoneOf(dir string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	z, ok := b.zones[dir]
	if !ok {
		z = string(rune('a' + len(b.zones)%2))
		b.zones[dir] = z
	}
	return z
}

const fastConfig = `heartbeat_interval = "50ms"
idle_timeout = "2s"
reconnect_backoff = "10ms"
reconnect_backoff_max = "100ms"
sync_meta_interval = "100ms"
wait_replicas = 2
timeout = "3s"`

// The promise checks (1, 2 and 3 slaves, and every fault with two) hold
// under a 2-of-3 quorum and under a policy that wants a replica in each
// of two zones, and the Node repairs a divergent tail under both.
func TestPolicyConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the replication conformance suite twice")
	}
	t.Run("Quorum2of3", func(t *testing.T) {
		plugintest.RunReplication(t, func(*testing.T) sdk.Replicator {
			return policyNode{Node: replication.NewNode(), pol: quorum{Voters: 3}}
		}, plugintest.WithConfig(fastConfig), plugintest.WithDivergentTailRepair())
	})
	t.Run("TwoZones", func(t *testing.T) {
		book := &zoneBook{zones: map[string]string{}}
		plugintest.RunReplication(t, func(*testing.T) sdk.Replicator {
			return policyNode{Node: replication.NewNode(), pol: zoneAware{Zones: 2}, zoneOf: book.zoneOf}
		}, plugintest.WithConfig(fastConfig), plugintest.WithDivergentTailRepair())
	})
}

func ExampleInSyncReplicas() {
	p := replication.InSyncReplicas{N: 2}
	v := p.Acknowledge(1000, []replication.Replica{
		{ID: "s1", Acked: 800, InSync: true},
		{ID: "s2", Acked: 600, InSync: true},
		{ID: "s3", Acked: 1000, InSync: false},
	})
	fmt.Println(v.Acked, v.InSync)
	// Output: 600 2
}
