package plugintest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Timings of the promise checks: short, so that the whole suite stays a
// few seconds per plugin.
const (
	syncWithin    = 5 * time.Second        // for replicas to come in sync or catch up
	faultDuration = 400 * time.Millisecond // a partition, a restart under load
	linkDelay     = 10 * time.Millisecond  // each way, in the delay fault
)

// WithDivergentTailRepair tells RunReplication that the plugin repairs
// a divergent tail: after the DivergentTail fault's takeover its new
// master must take writes again, acknowledged by its in-sync replicas, and
// its slaves must catch up. Without it a plugin that stays safe but keeps
// the new master fenced (or never acknowledging) instead is reported as
// "fenced (safe, not repaired)" and passes; an acknowledgement counting a
// replica that does not hold the bytes fails either way.
func WithDivergentTailRepair() Option { return func(o *options) { o.repair = true } }

// replPromise runs the promise checks: steady load with 1, 2 and 3
// slaves, then each fault on a fresh cluster.
func replPromise(t suiteT, newPlugin func(*testing.T) sdk.Replicator, o options) {
	for n := 1; n <= 3; n++ {
		t.run(fmt.Sprintf("Slaves%d", n), func(t suiteT) {
			s := newScenario(t, newPlugin, o, n, false)
			if n < s.c.need {
				s.tooFew()
				return
			}
			s.phase("steady", true)
			s.finish(s.c.slaves)
		})
	}
	// The faults run with as many slaves as the policy waits for (at
	// least one): every acknowledgement then needs all of them.
	pol := policyOf(t, newPlugin, o)
	all := max(1, pol.WaitReplicas)
	t.run("Faults", func(t suiteT) {
		for _, f := range []struct {
			name string
			run  func(t suiteT)
		}{
			{"Delay", func(t suiteT) { faultDelay(newScenario(t, newPlugin, o, all, false)) }},
			{"Partition", func(t suiteT) { faultPartition(newScenario(t, newPlugin, o, all, false)) }},
			{"SlaveRestart", func(t suiteT) { faultSlaveRestart(newScenario(t, newPlugin, o, all, false)) }},
			{"MasterRestart", func(t suiteT) { faultMasterRestart(newScenario(t, newPlugin, o, all, false)) }},
			{"SlavePowerCut", func(t suiteT) { faultSlavePowerCut(newScenario(t, newPlugin, o, all, true)) }},
			// One more slave: the old master rejoining with a divergent
			// tail is the extra one.
			{"DivergentTail", func(t suiteT) { faultDivergentTail(newScenario(t, newPlugin, o, all+1, false)) }},
		} {
			t.run(f.name, f.run)
		}
	})
}

// scenario is one cluster under load and faults, with every
// acknowledgement it got.
type scenario struct {
	t     suiteT
	c     *cluster
	got   acks
	hosts []*checkedHost // every master-role Host, across restarts
	cur   *acks          // the acknowledgements of the load under way
	per   int
}

// newScenario starts a cluster with n slaves.
func newScenario(t suiteT, newPlugin func(*testing.T) sdk.Replicator, o options, n int, crashSlave0 bool) *scenario {
	t.Helper()
	c := newCluster(t, newPlugin, o, n, crashSlave0)
	return &scenario{t: t, c: c, hosts: []*checkedHost{c.master.host}, per: max(10, o.perProducer/4)}
}

// policyOf configures a master-role instance to read its policy.
func policyOf(t suiteT, newPlugin func(*testing.T) sdk.Replicator, o options) sdk.ReplicationPolicy {
	t.Helper()
	e := newEnv(t, o, false)
	rp := newPlugin(t.std())
	lc := start(t, rp, nodeConfig(t, o, "master", freeAddr(t), "", ""), e.host)
	pol := rp.AckPolicy()
	lc.stop()
	return pol
}

// phase runs one round of producers to completion under fault name.
// healthy: the replicas are all up, so every acknowledgement must be
// SEND_OK within the policy's timeout once they are in sync.
func (s *scenario) phase(name string, healthy bool) {
	s.t.Helper()
	s.c.p.setFault(name)
	if healthy && s.c.pol.WaitReplicas > 0 && !s.c.inSync(syncWithin) {
		s.t.Errorf("fault %q: fewer than %d replicas in sync after %v (last report %+v)", name, s.c.pol.WaitReplicas, syncWithin, s.c.master.e.host.Replication())
	}
	var got acks
	if why := s.c.startLoad(name, s.per, &got).wait(); why != "" {
		s.t.Errorf("fault %q: %s (acknowledgements so far %s, last report %+v)", name, why, got.String(), s.c.master.e.host.Replication())
	}
	s.merge(&got)
	if healthy && got.count(storehost.AckOK) != s.c.o.producers*s.per {
		s.t.Errorf("fault %q: %d producers × %d records with all replicas up: acknowledgements %s (policy %+v, last report %+v)",
			name, s.c.o.producers, s.per, got.String(), s.c.pol, s.c.master.e.host.Replication())
	}
}

// underLoad runs producers while fault runs, then a little longer.
func (s *scenario) underLoad(name string, fault func()) {
	s.t.Helper()
	s.c.p.setFault(name)
	var got acks
	s.cur = &got
	defer func() { s.cur = nil }()
	l := s.c.startLoad(name, 0, &got)
	time.Sleep(faultDuration / 4)
	fault()
	time.Sleep(faultDuration / 2)
	if why := l.halt(); why != "" {
		s.t.Errorf("fault %q: %s", name, why)
	}
	s.merge(&got)
	s.t.Logf("fault %q: acknowledgements %s", name, got.String())
}

func (s *scenario) merge(a *acks) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for st, n := range a.counts {
		for i := 0; i < n; i++ {
			if st != storehost.AckOK {
				s.got.add(st, 0)
			}
		}
	}
	for _, e := range a.ok {
		s.got.add(storehost.AckOK, e)
	}
}

// tooFew checks a cluster with fewer slaves than the policy waits for:
// every acknowledgement is SLAVE_NOT_AVAILABLE, at once.
func (s *scenario) tooFew() {
	s.t.Helper()
	time.Sleep(100 * time.Millisecond) // let the slaves connect
	s.c.p.setFault("too few slaves")
	var got acks
	begin := time.Now()
	if why := s.c.startLoad("few", s.per, &got).wait(); why != "" {
		s.t.Errorf("%d slaves, policy %+v: %s", len(s.c.slaves), s.c.pol, why)
	}
	if n := got.count(storehost.AckSlaveNotAvailable); n != s.c.o.producers*s.per {
		s.t.Errorf("%d slaves, policy %+v: acknowledgements %s, want SLAVE_NOT_AVAILABLE for all %d", len(s.c.slaves), s.c.pol, got.String(), s.c.o.producers*s.per)
	}
	if d := time.Since(begin); s.c.pol.Timeout > 0 && d >= s.c.pol.Timeout {
		s.t.Errorf("%d slaves, policy %+v: %d acknowledgements took %v; SLAVE_NOT_AVAILABLE is answered at once", len(s.c.slaves), s.c.pol, s.c.o.producers*s.per, d)
	}
	s.c.checkReports(s.hosts)
}

// finish waits for the slaves in converge to hold the master's log, then
// runs the safety checks (see safe).
func (s *scenario) finish(converge []*member) {
	s.t.Helper()
	c := s.c
	if !c.converged(converge, syncWithin) {
		var at []string
		for _, m := range converge {
			at = append(at, fmt.Sprintf("%s at %d", m.name, m.e.store.Positions().Committed))
		}
		s.t.Errorf("replicas did not catch up with the master (at %d) within %v: %s", c.masterStore().Positions().Committed, syncWithin, strings.Join(at, ", "))
	}
	s.safe()
}

// safe fails the test with the reports that acknowledged bytes the
// replicas did not hold and the acknowledged-but-lost counts per fault:
// the promise itself, which no plugin may break, whether or not it
// repairs what a fault left.
func (s *scenario) safe() {
	s.t.Helper()
	c := s.c
	c.checkReports(s.hosts)
	ends := s.acknowledged(s.got.okEnds())
	if lost := c.p.unheld(ends); len(lost) > 0 {
		s.t.Errorf("acknowledged but not held by %d replica(s) when acknowledged, per fault (of %d SEND_OK): %s", c.need, len(ends), perFault(lost))
	}
	if len(ends) > 0 {
		top := slices.Max(ends)
		if h := c.p.held(top); h < top {
			s.t.Errorf("at the end, %d replica(s) hold the master's log only up to %d; records acknowledged up to %d", c.need, h, top)
		}
	}
	_, reports := c.p.counts()
	s.t.Logf("policy %+v, %d slaves: acknowledgements %s; %d reports checked", c.pol, len(c.slaves), s.got.String(), reports)
}

// lostNow counts the acknowledged records that fewer than need replicas
// hold now.
func (s *scenario) lostNow() (lost, of int) {
	ends := s.got.okEnds()
	if s.cur != nil {
		ends = append(ends, s.cur.okEnds()...)
	}
	ends = s.acknowledged(ends)
	if len(ends) == 0 {
		return 0, 0
	}
	h := s.c.p.held(slices.Max(ends))
	for _, e := range ends {
		if e > h {
			lost++
		}
	}
	return lost, len(ends)
}

// acknowledged keeps the SEND_OK record ends replication acknowledged:
// all of them under a policy that waits for replicas; under one that does
// not (SEND_OK promises nothing about replicas), those below the
// AckedOffset the master reported.
func (s *scenario) acknowledged(ends []int64) []int64 {
	if s.c.pol.WaitReplicas > 0 {
		return ends
	}
	a := s.c.p.ackedNow()
	return slices.DeleteFunc(ends, func(e int64) bool { return e > a })
}

// maxAcked is the end of the last record acknowledged SEND_OK.
func (s *scenario) maxAcked() int64 {
	ends := s.got.okEnds()
	if s.cur != nil {
		ends = append(ends, s.cur.okEnds()...)
	}
	if len(ends) == 0 {
		return 0
	}
	return slices.Max(ends)
}

func perFault(m map[string]int) string {
	var parts []string
	for f, n := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", f, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// ---------------------------------------------------------------- faults

func faultDelay(s *scenario) {
	for _, sl := range s.c.slaves {
		sl.proxy.setDelay(linkDelay)
	}
	s.phase("delay", true)
	s.finish(s.c.slaves)
}

func faultPartition(s *scenario) {
	s.phase("before partition", true)
	s.underLoad("partition", func() {
		for _, sl := range s.c.slaves {
			sl.proxy.partition()
		}
		time.Sleep(faultDuration)
		for _, sl := range s.c.slaves {
			sl.proxy.reset()
			sl.proxy.heal()
		}
	})
	s.phase("after partition", true)
	s.finish(s.c.slaves)
}

func faultSlaveRestart(s *scenario) {
	s.phase("before slave restart", true)
	s.underLoad("slave restart", func() { s.c.restartSlave(s.c.slaves[0]) })
	s.phase("after slave restart", true)
	s.finish(s.c.slaves)
}

func faultMasterRestart(s *scenario) {
	s.phase("before master restart", true)
	s.c.p.setFault("master restart")
	s.c.restartMaster()
	s.hosts = append(s.hosts, s.c.master.host)
	s.phase("after master restart", true)
	s.finish(s.c.slaves)
}

func faultSlavePowerCut(s *scenario) {
	s.phase("before power cut", true)
	cut := s.c.slaves[0]
	s.underLoad("power cut", func() {
		s.c.powerCutSlave(cut)
		lost, of := s.lostNow()
		switch {
		case lost > 0 && s.c.o.replicaFlush:
			p := cut.e.store.Positions()
			s.t.Errorf("fault %q: %d of %d acknowledged records are held by fewer than %d replica(s) after %s lost its unflushed bytes, though its acknowledgements wait for its flush (its recovered log ends at %d, flushed %d; acknowledged up to %d)",
				"power cut", lost, of, s.c.need, cut.name, p.Committed, p.Flushed, s.maxAcked())
		default:
			s.t.Logf("fault %q: %d of %d acknowledged records held by fewer than %d replica(s) after %s lost its unflushed bytes (log now ends at %d)",
				"power cut", lost, of, s.c.need, cut.name, cut.e.store.Positions().Committed)
		}
		s.c.startSlave(cut)
	})
	s.phase("after power cut", true)
	s.finish(s.c.slaves)
}

// faultDivergentTail: the master appends records no replica received and
// is stopped; its first slave takes over as master, and the old master
// (with its divergent tail, longer than what the new master writes here)
// and the other slaves all rejoin it as slaves at once. No
// acknowledgement may count the old master before it holds the new
// master's log (a failure whatever the plugin does next).
//
// Repair is the new master taking writes again, acknowledged by its
// in-sync replicas, and the other slaves catching up. A plugin that
// instead keeps the new master fenced, or never acknowledging, is safe
// but does not repair: it is reported as "fenced (safe, not repaired)"
// and passes, after a short load that its acknowledgements must survive,
// unless WithDivergentTailRepair asks for repair. fenced reports that
// verdict.
func faultDivergentTail(s *scenario) (fenced bool) {
	c := s.c
	s.phase("before takeover", true)
	if !c.converged(c.slaves, syncWithin) {
		s.t.Fatalf("slaves did not catch up with the master before the takeover")
	}
	c.stopAll()
	old := c.master
	for i := 0; i < 200; i++ {
		if _, err := old.e.store.Append(message("ReplP", 0, strings.Repeat("divergent ", 50)+fmt.Sprint(i), "")); err != nil {
			s.t.Fatalf("append the divergent tail: %v", err)
		}
	}
	nm := c.slaves[0]
	nm.cfg = nodeConfig(s.t, c.o, "master", freeAddr(s.t), "", nm.cfg.DataDir)
	nm.proxy, nm.view = nil, nil
	old.proxy = newProxy(s.t, nm.cfg.Addr)
	old.proxy.setDelay(c.o.oldMasterDelay)
	old.cfg = nodeConfig(s.t, c.o, "slave", freeAddr(s.t), old.proxy.addr(), old.cfg.DataDir)
	old.name = "old master"
	old.view = &replicaView{name: old.name, store: func() *core.Store { return old.e.store }}
	others := c.slaves[1:]
	for _, sl := range others {
		sl.proxy.retarget(nm.cfg.Addr)
		sl.proxy.reset()
	}
	c.master = nm
	c.slaves = append([]*member{old}, others...)
	c.p.reset(c.masterStore, c.views())
	c.p.setFault("divergent tail")
	c.startMaster()
	s.hosts = append(s.hosts, c.master.host)
	// Everyone rejoins at once: the other slaves may already be
	// streaming from the new master while it catches up from the old
	// master's longer tail, which must not fence it (a stream carrying
	// the pulled bytes under the epoch the catch-up replaces did).
	c.startSlave(old)
	for _, sl := range others {
		c.startSlave(sl)
	}
	// The verdict waits for the new master's answer to the old master:
	// until then the other slaves can put it in sync, unfenced, only for
	// the old master's longer tail to fence it a moment later. (A plugin
	// that answers none of these ways is judged after syncWithin.)
	oldEnd := old.e.store.Positions().Committed
	eventually(syncWithin, func() bool {
		f, _ := c.master.e.host.Fenced()
		return f || old.proxy.ended.Load() > 0 || // fenced, or refused the old master
			old.e.store.Positions().Committed != oldEnd || // cut its tail
			c.masterStore().Positions().Committed >= oldEnd // caught up from it
	})
	if !c.o.repair && !c.takesWrites(syncWithin) {
		f, why := c.master.e.host.Fenced()
		s.t.Logf("fault %q: fenced (safe, not repaired): %v after the takeover the new master is fenced=%v (%q) with %d replica(s) in sync (the policy counts %d); "+
			"WithDivergentTailRepair would require repair", "divergent tail", syncWithin, f, why, c.master.e.host.InSync(), c.need)
		s.underLoad("divergent tail, not repaired", func() {})
		s.safe()
		return true
	}
	if !c.converged(others, syncWithin) {
		s.t.Errorf("the slaves did not catch up with the new master within %v", syncWithin)
	}
	s.phase("after takeover", true)
	s.finish(others)
	if c.converged([]*member{old}, time.Second) {
		s.t.Logf("the old master's divergent tail was repaired: it holds the new master's log")
	} else {
		s.t.Logf("the old master was not repaired (at %d, the new master at %d)", old.e.store.Positions().Committed, c.masterStore().Positions().Committed)
	}
	return false
}

// takesWrites waits up to d for the master to be unfenced with, under a
// policy that waits for replicas, at least need of them in sync.
func (c *cluster) takesWrites(d time.Duration) bool {
	return eventually(d, func() bool {
		h := c.master.e.host
		f, _ := h.Fenced()
		return !f && (c.pol.WaitReplicas == 0 || h.InSync() >= c.need)
	})
}
