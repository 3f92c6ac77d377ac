package controller

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestNoCandidate: a master dies with nobody else in the SyncStateSet.
// Without unclean elections the master is cleared (its epoch fenced), the
// slave is not elected, and the old master is elected again when it
// returns; with them, the slave is elected at once.
func TestNoCandidate(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "unclean"}[unclean], func(t *testing.T) {
			nodes := startClusterWith(t, 1, func(c *Config) { c.ElectUnclean = unclean })
			n := leaderOf(t, nodes, 10*time.Second)
			k := GroupKey{"c1", "broker-a"}
			a1 := newTestBroker(t, []string{n.addr}, k, "a1", 10)
			a2 := newTestBroker(t, []string{n.addr}, k, "a2", 5)
			a1.beat()
			a2.beat()
			g := waitMaster(t, a2.cl, k, a1.id, 5*time.Second)
			a1.paused.Store(true)
			if unclean {
				g = waitMaster(t, a2.cl, k, a2.id, testHeartbeatTimeout+time.Second)
				if g.MasterEpoch != 2 || !slices.Equal(g.SyncStateSet, []int64{a2.id}) {
					t.Fatalf("after the unclean election: %+v", g)
				}
				return
			}
			g = waitMaster(t, a2.cl, k, 0, testHeartbeatTimeout+time.Second)
			if g.MasterEpoch != 2 || !slices.Equal(g.SyncStateSet, []int64{a1.id}) {
				t.Fatalf("after the master was cleared: %+v", g)
			}
			if _, err := a1.cl.AlterSyncStateSet(context.Background(), k, a1.id, 1, []int64{a1.id}, g.SyncStateSetEpoch); !isErr(err, ErrFencedMasterEpoch) {
				t.Fatalf("the cleared master's alter: %v, want ErrFencedMasterEpoch", err)
			}
			time.Sleep(5 * testScanInterval) // scans retry and must not elect a2
			if g = replica(t, a2.cl, k); g.MasterID != 0 {
				t.Fatalf("a member outside the SyncStateSet was elected: %+v", g)
			}
			a1.paused.Store(false)
			g = waitMaster(t, a2.cl, k, a1.id, 2*time.Second)
			if g.MasterEpoch != 3 {
				t.Fatalf("after the old master returned: %+v", g)
			}
		})
	}
}
