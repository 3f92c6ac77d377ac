package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/host/controller"
)

// Cluster mode end to end (issue #18): real keel processes started from
// the shipped profiles in configs/profiles/cluster — three name servers
// with raft controllers and broker groups of two sync-replication
// brokers — on 127.0.0.1 ports the tests pick, driven by the real
// rocketmq-client-go. Timing is the shipped profiles' (controller
// heartbeat timeout 3 s, so a master's lease is 2 s).
//
// Facts about the client these tests live with: it refreshes routes from
// the name servers every 30 s (_PullNameServerInterval, a constant in
// rocketmq-client-go's internal package, not an option), so after a
// failover it keeps sending to the dead or demoted master of a group until
// then; its retries (producer.WithRetry) move to another group, which is
// how producers keep going. With sync replication and two brokers a
// group, a newly elected master has no in-sync replica until the old one
// rejoins, and answers SLAVE_NOT_AVAILABLE meanwhile: only SEND_OK counts
// as acknowledged.

// clusterRounds is how many kill -9 failovers TestClusterKill9MasterRounds
// runs, alternating groups.
const clusterRounds = 10

// routePoll is rocketmq-client-go's route poll interval
// (_PullNameServerInterval).
const routePoll = 30 * time.Second

// TestClusterKill9MasterRounds: 3 controllers, groups broker-a and
// broker-b (master + slave, sync replication), three producer clients
// sending across both groups and a push consumer. Ten times, alternating groups: kill -9
// the group's master under load; the controller elects the slave; the
// killed broker restarts on its store and comes back as the new master's
// slave, catches up and rejoins the SyncStateSet. Producers keep getting
// SEND_OK throughout (from the other group while one fails over). At the
// end every message acknowledged SEND_OK was consumed and is in its
// group's log at the queue offset its send result named; both brokers of
// a group hold identical logs; no consumed message is missing from them
// (consumers saw no tail a failover cut); and every redelivery is
// explained by the offset commit window of a failover (no offset reset).
// Ten rounds take about a minute.
func TestClusterKill9MasterRounds(t *testing.T) {
	skipShort(t)
	logClientOnFailure(t)
	groups := []string{"broker-a", "broker-b"}
	c := startCluster(t, groups, nil, noSets)
	const topic = "ClusterRounds"
	c.createTopic(topic, groups...)
	deliveries := newDeliveryLog()
	startClusterConsumer(t, c, "CG_rounds", topic, deliveries)
	// Three producer clients started routePoll/3 apart: each polls routes
	// every 30 s, so after a failover one of them finds the group's new
	// master within about 10 s, and a round takes that long instead of a
	// whole route poll (each client on its own keeps going through the
	// other group until its poll).
	load := startClusterLoad(newClusterProducer(t, c, "cluster-rounds-0"), topic, 1, 5*time.Millisecond)
	defer load.finish()
	for i := 1; i < 3; i++ {
		time.Sleep(routePoll / 3)
		load.addSenders(newClusterProducer(t, c, fmt.Sprintf("cluster-rounds-%d", i)), 1)
	}
	for _, g := range groups {
		if err := load.waitAcks(g, time.Now(), 20*time.Second); err != nil {
			t.Fatalf("before the first failover: %v", err)
		}
	}

	var failures []time.Time
	for r := 0; r < clusterRounds; r++ {
		g := groups[r%len(groups)]
		m, s, before := c.masterOf(g)
		sm, _ := memberOf(before, s)
		acks := load.ackCount()
		t0 := time.Now()
		m.kill()
		failures = append(failures, t0)
		after := c.waitGroup(g, "the slave elected", 20*time.Second, func(gr controller.Group) bool {
			return gr.MasterEpoch > before.MasterEpoch && gr.MasterID != 0
		})
		if after.MasterID != sm.ID {
			t.Fatalf("round %d (%s): the controller elected broker id %d, want the in-sync slave %s (id %d): %+v", r, g, after.MasterID, s.name, sm.ID, after)
		}
		s.waitStatus(10*time.Second, "the elected slave to run as master", func(st *replStatus) bool { return st.Role == "master" })
		elected := time.Since(t0)
		m.start()
		m.waitStatus(20*time.Second, "the killed master back as a slave", func(st *replStatus) bool { return st.Role == "slave" })
		s.waitStatus(30*time.Second, "the new master with its replica in sync", func(st *replStatus) bool {
			return st.Writable == "yes" && st.Replication.InSync >= 1
		})
		c.waitGroup(g, "both brokers in the SyncStateSet again", 20*time.Second, func(gr controller.Group) bool { return len(gr.SyncStateSet) == 2 })
		// Producers keep going on the other group meanwhile, and come back
		// to this one once the client's route poll (at most 30 s) finds
		// its new master.
		if err := load.waitAcks(other(groups, g), t0, 20*time.Second); err != nil {
			t.Errorf("round %d: %v", r, err)
		}
		rejoined := time.Now()
		if err := load.waitAcks(g, rejoined, routePoll+15*time.Second); err != nil {
			t.Errorf("round %d: %v", r, err)
		}
		t.Logf("round %d: %s master %s killed; %s elected (epoch %d) after %v; rejoined and in sync after %v; SEND_OK from %s again after %v; %d SEND_OK in the round",
			r, g, m.name, s.name, after.MasterEpoch, elected.Round(time.Millisecond), rejoined.Sub(t0).Round(time.Millisecond), g,
			time.Since(t0).Round(time.Millisecond), load.ackCount()-acks)
	}

	load.finish()
	acked := load.acked()
	t.Logf("load: %s", load.summary())
	if err := waitFor(60*time.Second, func() bool { n, _ := deliveries.missing(bodiesOf(acked)); return n == 0 }); err != nil {
		n, some := deliveries.missing(bodiesOf(acked))
		t.Errorf("%d of %d acknowledged messages never consumed, e.g. %v", n, len(acked), some)
	}
	checkNoOffsetReset(t, deliveries, failures)
	stored := map[string]bool{}
	for _, g := range groups {
		for b := range c.checkGroupLogs(g, acked).bodies() {
			stored[b] = true
		}
	}
	// Consumers see only replicated messages (visible_after_replicated in
	// the shipped profiles), so none they saw was lost in a failover.
	var phantoms []string
	for _, b := range deliveries.bodies() {
		if !stored[b] {
			phantoms = append(phantoms, b)
		}
	}
	if len(phantoms) > 0 {
		t.Errorf("%d consumed messages are in no store after the failovers (a consumer saw an old master's unreplicated tail): %s", len(phantoms), abbrev(phantoms))
	}
}

// checkGroupLogs waits until the group's slave holds the master's log,
// stops both brokers, and checks that their logs are identical and hold
// every ack of the group at its queue offset.
func (c *testCluster) checkGroupLogs(g string, acked []clusterAck) *storeLog {
	t := c.t
	t.Helper()
	m, s, _ := c.masterOf(g)
	for _, n := range c.groups[g] {
		if lines := n.log.grep("divergent tail"); len(lines) > 0 {
			t.Logf("%s cut a divergent tail %d time(s) when it rejoined (all runs), e.g. %s", n.name, len(lines), lines[0])
		}
	}
	waitSameCommitted(t, m.keelProc, s.keelProc, 0, 30*time.Second)
	s.stop()
	m.stop()
	ml, sl := inspectStore(t, m.cfg.data), inspectStore(t, s.cfg.data)
	compareLogs(t, m.name, ml, s.name, sl)
	checkAcksStored(t, g, acked, ml, m.name+"'s log")
	return ml
}

// TestClusterPartitionedMasterStopsAcking: the master of broker-a reaches
// the controllers only through proxies the test controls (ctlProxy: the
// leader redirects are rewritten, so no connection goes around them);
// its slave reaches them directly. The partition comes in two kinds:
// "cut" closes the master's connections to the controllers (the leader
// sees the heartbeat connection close and elects at once; the master's
// lease ends with the connection), "silent" keeps them open and lets
// nothing through (the master's lease, 2/3 of the controllers' 3 s
// heartbeat timeout, runs out before the controllers count it dead).
// Under load: the master stops acknowledging within its lease, and before
// the controllers elect the slave (a new epoch); nothing the old master
// acknowledged is lost. Healing the partition brings the old master back
// as the new master's slave: it truncates whatever it wrote that the new
// master does not have, catches up, and both logs end identical, holding
// every acknowledged message.
func TestClusterPartitionedMasterStopsAcking(t *testing.T) {
	skipShort(t)
	t.Run("cut", func(t *testing.T) { testPartitionedMaster(t, proxyCut) })
	t.Run("silent", func(t *testing.T) { testPartitionedMaster(t, proxyPaused) })
}

func testPartitionedMaster(t *testing.T, mode int) {
	logClientOnFailure(t)
	var proxies []*ctlProxy
	c := startCluster(t, []string{"broker-a"}, nil, func(c *testCluster, _ string, i int) []string {
		if i != 1 {
			return nil
		}
		proxies = startCtlProxies(t, c.ctlAddr)
		addrs := make([]string, len(proxies))
		for j, p := range proxies {
			addrs[j] = p.Addr()
		}
		return []string{"controller.addrs=" + tomlList(addrs)}
	})
	const topic = "ClusterPartition"
	c.createTopic(topic, "broker-a")
	m, s, before := c.masterOf("broker-a")
	if m.name != "broker-a-1" {
		t.Fatalf("the proxied broker-a-1 should be master, the controller names %s", m.name)
	}
	sm, _ := memberOf(before, s)
	load := startClusterLoad(newClusterProducer(t, c, "cluster-partition"), topic, 2, 5*time.Millisecond)
	defer load.finish()
	if err := waitFor(20*time.Second, func() bool { return load.ackCount() >= 200 }); err != nil {
		t.Fatalf("no steady load before the partition: %s", load.summary())
	}

	const lease = 2 * time.Second // 2/3 of controller.heartbeat_timeout (3 s)
	cutAt := time.Now()
	for _, p := range proxies {
		p.setMode(mode)
	}
	// Watch both at once: when the old master first refuses writes, and
	// when the controllers first name a new master.
	var refusedAt, electedAt time.Time
	var after controller.Group
	var last *replStatus
	if err := waitFor(lease+10*time.Second, func() bool {
		if refusedAt.IsZero() {
			if st, err := m.rstatus(); err == nil {
				last = st
				if st.Writable != "yes" {
					refusedAt = time.Now()
				}
			}
		}
		if electedAt.IsZero() {
			if g, err := c.group("broker-a"); err == nil && g.MasterEpoch > before.MasterEpoch && g.MasterID != 0 {
				after, electedAt = g, time.Now()
			}
		}
		return !refusedAt.IsZero() && !electedAt.IsZero()
	}); err != nil {
		t.Fatalf("after the partition: old master refusing at %v (last status %v), new master at %v", refusedAt, last, electedAt)
	}
	t.Logf("partition at %s: old master refusing writes after %v, new master (epoch %d) seen after %v",
		cutAt.Format("15:04:05.000"), refusedAt.Sub(cutAt).Round(time.Millisecond), after.MasterEpoch, electedAt.Sub(cutAt).Round(time.Millisecond))
	if after.MasterID != sm.ID {
		t.Fatalf("the controller elected broker id %d, want %s (id %d): %+v", after.MasterID, s.name, sm.ID, after)
	}
	if d := refusedAt.Sub(cutAt); d > lease+time.Second {
		t.Errorf("the cut-off master refused writes only %v after the partition, lease %v", d, lease)
	}
	if mode == proxyPaused && electedAt.Before(refusedAt) {
		t.Errorf("the controllers elected a new master (seen at %s) before the old one refused writes (seen at %s)",
			electedAt.Format("15:04:05.000"), refusedAt.Format("15:04:05.000"))
	}
	s.waitStatus(10*time.Second, "the elected slave to run as master", func(st *replStatus) bool { return st.Role == "master" })
	time.Sleep(2 * time.Second) // the partition lasts: the old master must keep refusing
	if st := m.mustStatus(); st.Writable == "yes" {
		t.Errorf("the cut-off old master takes writes again during the partition: %v", st)
	}
	healAt := time.Now()
	for _, p := range proxies {
		p.setMode(proxyUp)
	}
	m.waitStatus(20*time.Second, "the old master back as the new master's slave", func(st *replStatus) bool { return st.Role == "slave" })
	s.waitStatus(30*time.Second, "the new master with the old one in sync", func(st *replStatus) bool {
		return st.Writable == "yes" && st.Replication.InSync >= 1
	})
	// A fresh producer routes to the new master at once (the running one
	// learns of it at its next route poll).
	waitRouteMaster(t, c.nsAddrs, topic, "broker-a", s)
	late := startClusterLoad(newClusterProducer(t, c, "cluster-partition-late"), topic, 1, 5*time.Millisecond)
	if err := waitFor(20*time.Second, func() bool { return late.ackCount() >= 20 }); err != nil {
		t.Errorf("no SEND_OK from the new master after healing: %s", late.summary())
	}
	late.finish()
	load.finish()
	acked := append(load.acked(), late.acked()...)
	t.Logf("load: %s; after healing: %s", load.summary(), late.summary())

	// The lease rule: nothing acknowledged by the old master after it was
	// seen refusing writes (1 s of slack for a send in flight), nor after
	// the new master was seen.
	byOld, byNew, lateAcks := 0, 0, 0
	for _, a := range acked {
		switch a.broker {
		case m.Broker:
			byOld++
			switch {
			case a.at.After(electedAt):
				// host/cluster.go promises the cut-off master stops taking
				// writes at least T/3 before another can be elected.
				lateAcks++
				if lateAcks <= 5 {
					t.Errorf("lease rule broken: %s acknowledged by the cut-off old master at %s, after the controllers had elected %s (seen at %s; cut at %s, old master seen refusing at %s)",
						a.body, a.at.Format("15:04:05.000"), s.name, electedAt.Format("15:04:05.000"), cutAt.Format("15:04:05.000"), refusedAt.Format("15:04:05.000"))
				}
			case a.at.After(refusedAt.Add(time.Second)):
				t.Errorf("%s acknowledged by the cut-off old master at %s, more than 1 s after it was seen refusing writes (%s)",
					a.body, a.at.Format("15:04:05.000"), refusedAt.Format("15:04:05.000"))
			}
		case s.Broker:
			byNew++
			if a.at.Before(cutAt) {
				t.Errorf("%s acknowledged by %s at %s, before the partition made it master", a.body, s.name, a.at.Format("15:04:05.000"))
			}
		}
	}
	t.Logf("acknowledged by the old master: %d (%d after the election), by the new one: %d (healed at %s)", byOld, lateAcks, byNew, healAt.Format("15:04:05.000"))
	// The demoted master's consume queues follow its log: with
	// visible_after_replicated (the shipped profiles) its dispatch is
	// bounded by its confirm offset, which must reach what it holds of the
	// new master's acknowledged log.
	ms := s.mustStatus()
	m.waitStatus(20*time.Second, fmt.Sprintf("the demoted old master to dispatch the new master's whole acknowledged log (committed %d, acked %d): "+
		"its confirm and dispatched offsets must reach it", ms.committed(), ms.Replication.AckedOffset),
		func(st *replStatus) bool {
			return st.committed() >= ms.committed() && st.Offsets["dispatched"] >= ms.Replication.AckedOffset && st.Offsets["confirm"] >= ms.Replication.AckedOffset
		})
	// Both logs identical and holding every acknowledged message: nothing
	// acknowledged survives only on the old master.
	c.checkGroupLogs("broker-a", acked)
}

// TestClusterControllerLeaderKilledDuringFailover: kill -9 broker-a's
// master and at once the raft leader of the controllers. The remaining two
// controllers elect a raft leader, which counts the master dead and
// elects the slave; the killed master and controller restart and rejoin.
func TestClusterControllerLeaderKilledDuringFailover(t *testing.T) {
	skipShort(t)
	logClientOnFailure(t)
	c := startCluster(t, []string{"broker-a"}, nil, noSets)
	const topic = "ClusterLeaderKill"
	c.createTopic(topic, "broker-a")
	load := startClusterLoad(newClusterProducer(t, c, "cluster-leader-kill"), topic, 1, 5*time.Millisecond)
	defer load.finish()
	if err := waitFor(20*time.Second, func() bool { return load.ackCount() >= 100 }); err != nil {
		t.Fatalf("no steady load: %s", load.summary())
	}
	m, s, before := c.masterOf("broker-a")
	sm, _ := memberOf(before, s)
	leader := c.leader()
	t0 := time.Now()
	m.kill()
	leader.kill()
	after := c.waitGroup("broker-a", "the slave elected by the new controller leader", 30*time.Second, func(g controller.Group) bool {
		return g.MasterEpoch > before.MasterEpoch && g.MasterID != 0
	})
	if after.MasterID != sm.ID {
		t.Fatalf("the controller elected broker id %d, want %s (id %d): %+v", after.MasterID, s.name, sm.ID, after)
	}
	s.waitStatus(10*time.Second, "the elected slave to run as master", func(st *replStatus) bool { return st.Role == "master" })
	newLeader := c.leader()
	t.Logf("master %s and controller leader %s killed; %s led by %s elected %s (epoch %d) after %v",
		m.name, leader.name, "broker-a", newLeader.name, s.name, after.MasterEpoch, time.Since(t0).Round(time.Millisecond))
	if newLeader == leader {
		t.Fatalf("the killed controller %s still leads", leader.name)
	}
	leader.start()
	m.start()
	m.waitStatus(20*time.Second, "the killed master back as a slave", func(st *replStatus) bool { return st.Role == "slave" })
	s.waitStatus(30*time.Second, "the new master with its replica in sync", func(st *replStatus) bool {
		return st.Writable == "yes" && st.Replication.InSync >= 1
	})
	// The new master takes writes: a fresh producer (the running one
	// learns of it at its next route poll) of the name servers that
	// stayed up (the killed controller's name server restarted empty and
	// learns of the brokers at their next registration, register_interval).
	var up []string
	for _, n := range c.ctls {
		if n != leader {
			up = append(up, n.NamesrvAddr)
		}
	}
	waitRouteMaster(t, up, topic, "broker-a", s)
	late := startClusterLoad(newProducerOf(t, up, "cluster-leader-kill-late"), topic, 1, 5*time.Millisecond)
	if err := waitFor(20*time.Second, func() bool { return late.ackCount() >= 20 }); err != nil {
		t.Errorf("no SEND_OK from the new master: %s", late.summary())
	}
	late.finish()
	load.finish()
	t.Logf("load: %s; after the failover: %s", load.summary(), late.summary())
	c.checkGroupLogs("broker-a", append(load.acked(), late.acked()...))
}

// TestClusterWipedMasterRejoinsAsSlave: the seed incident in cluster
// mode. broker-a's master is killed (SIGKILL), its data directory wiped,
// and it restarts at once on the same addresses: with its node id gone
// with the disk it registers as a new member, outside the SyncStateSet,
// so the controller elects the old slave, and the wiped broker comes back
// as its slave, copies the whole log and joins the SyncStateSet. It is
// never master while it holds less than the new master (watched on its
// /status every 50 ms). The consumer, which had consumed and committed
// every message before the kill, receives the new messages and none of
// the old ones again; the committed offsets on the surviving broker never
// go down (QUERY_CONSUMER_OFFSET polled throughout).
func TestClusterWipedMasterRejoinsAsSlave(t *testing.T) {
	skipShort(t)
	logClientOnFailure(t)
	c := startCluster(t, []string{"broker-a"}, nil, noSets)
	const topic, group = "ClusterWiped", "CG_wiped"
	c.createTopic(topic, "broker-a")
	m, s, before := c.masterOf("broker-a")
	sm, _ := memberOf(before, s)
	oldID, _ := memberOf(before, m)
	p := newClusterProducer(t, c, "cluster-wiped")
	const n = 400
	first := sendN(t, p, topic, "before", "", 0, n)
	deliveries := newDeliveryLog()
	startClusterConsumer(t, c, group, topic, deliveries)
	if err := waitFor(30*time.Second, func() bool { k, _ := deliveries.missing(first); return k == 0 }); err != nil {
		k, some := deliveries.missing(first)
		t.Fatalf("%d of %d messages not consumed before the kill, e.g. %v", k, n, some)
	}
	// Committed on the master and, by metadata sync, on the slave.
	slavePoll := startOffsetPoller(t, s.name, s.Broker, group, topic)
	slavePoll.waitSum(t, n, 30*time.Second)

	// Watch the wiped broker's role and data from its restart on.
	var watch sync.WaitGroup
	stopWatch := make(chan struct{})
	var mu sync.Mutex
	var masterSightings []string
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(50 * time.Millisecond):
			}
			st, err := m.rstatus()
			if err != nil || st.Role != "master" {
				continue
			}
			ss, _ := s.rstatus()
			mu.Lock()
			masterSightings = append(masterSightings, fmt.Sprintf("at %s: wiped broker master with committed %d (other broker: %v)",
				time.Now().Format("15:04:05.000"), st.committed(), ss))
			mu.Unlock()
		}
	}()
	failedAt := time.Now()
	m.kill()
	wipeDir(t, m.cfg.data)
	m.start()
	after := c.waitGroup("broker-a", "the old slave elected", 20*time.Second, func(g controller.Group) bool {
		return g.MasterEpoch > before.MasterEpoch && g.MasterID != 0
	})
	if after.MasterID != sm.ID {
		t.Fatalf("the controller elected broker id %d, want the surviving %s (id %d): %+v", after.MasterID, s.name, sm.ID, after)
	}
	newID, ok := memberOf(after, m)
	if !ok || newID.ID == oldID.ID || newID.NodeID == oldID.NodeID {
		t.Errorf("the wiped broker should be a new member (new id and node id), was %+v, is %+v", oldID, newID)
	}
	m.waitStatus(20*time.Second, "the wiped broker as a slave", func(st *replStatus) bool { return st.Role == "slave" })
	waitSameCommitted(t, s.keelProc, m.keelProc, 1, 30*time.Second)
	s.waitStatus(30*time.Second, "the new master with the wiped broker in sync", func(st *replStatus) bool {
		return st.Writable == "yes" && st.Replication.InSync >= 1
	})
	c.waitGroup("broker-a", "the wiped broker in the SyncStateSet", 20*time.Second, func(g controller.Group) bool {
		return len(g.SyncStateSet) == 2 && g.SyncStateSet[0] != oldID.ID && g.SyncStateSet[1] != oldID.ID
	})
	t.Logf("wiped master back as slave, caught up and in the SyncStateSet %v after %v", after.SyncStateSet, time.Since(failedAt).Round(time.Millisecond))

	// New messages through a fresh producer (routes to the new master at
	// once); the consumer gets them, and none of the old ones again.
	waitRouteMaster(t, c.nsAddrs, topic, "broker-a", s)
	p2 := newClusterProducer(t, c, "cluster-wiped-late")
	second := sendN(t, p2, topic, "after", "", 0, 100)
	if err := waitFor(45*time.Second, func() bool { k, _ := deliveries.missing(second); return k == 0 }); err != nil {
		k, some := deliveries.missing(second)
		t.Errorf("%d of 100 messages sent after the failover not consumed, e.g. %v", k, some)
	}
	close(stopWatch)
	watch.Wait()
	mu.Lock()
	for _, s := range masterSightings {
		t.Errorf("the wiped broker ran as master: %s", s)
	}
	mu.Unlock()
	var again []string
	for _, r := range deliveries.redeliveries() {
		if strings.HasPrefix(r.body, "before-") {
			again = append(again, r.body)
		}
	}
	if len(again) > 0 {
		t.Errorf("%d messages consumed and committed before the kill were delivered again (offset reset): %s", len(again), abbrev(again))
	}
	slavePoll.close()
	slavePoll.report(t)
	c.checkGroupLogs("broker-a", nil)
}
