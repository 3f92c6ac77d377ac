package plugintest

import (
	"fmt"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

const clusterSecret = "plugintest-cluster-secret"

// cluster is a master and its slaves, each slave reaching the master
// through its own proxy, with the promise checked on every report.
type cluster struct {
	t         suiteT
	o         options
	newPlugin func(*testing.T) sdk.Replicator
	p         *promise
	pol       sdk.ReplicationPolicy
	ack       storehost.AckPolicy
	need      int // max(1, pol.WaitReplicas): the replicas an acknowledgement counts

	master *member
	slaves []*member
}

// member is one node: its store, profile and running replicator.
type member struct {
	name  string
	e     *env
	cfg   sdk.Config
	lc    *lifecycle
	view  *replicaView // slaves only
	proxy *proxy       // slaves only: the way to the master
	host  *checkedHost // master only
}

// nodeConfig writes the profile of a node in role with its own data
// directory (dataDir keeps an earlier one, for a node changing roles).
func nodeConfig(t testing.TB, o options, role, addr, peer, dataDir string) sdk.Config {
	extra := fmt.Sprintf("role = %q\nsecret = %q\n", role, clusterSecret)
	if role == "slave" {
		extra += fmt.Sprintf("master_addr = %q\n", peer)
	}
	cfg := writeProfile(t, "replication", extra, o.config)
	cfg.Role, cfg.Addr, cfg.PeerAddr, cfg.Secret = role, addr, peer, clusterSecret
	if dataDir != "" {
		cfg.DataDir = dataDir
	}
	return cfg
}

// newCluster starts a master and n slaves; crashSlave0 puts the first
// slave's store on a CrashFS.
func newCluster(t suiteT, newPlugin func(*testing.T) sdk.Replicator, o options, n int, crashSlave0 bool) *cluster {
	t.Helper()
	c := &cluster{t: t, o: o, newPlugin: newPlugin}
	maddr := freeAddr(t)
	c.master = &member{name: "master", e: newEnv(t, o, false), cfg: nodeConfig(t, o, "master", maddr, "", "")}
	c.startMaster()
	for i := 0; i < n; i++ {
		s := &member{name: fmt.Sprintf("slave%d", i+1), e: newEnv(t, o, crashSlave0 && i == 0)}
		s.proxy = newProxy(t, maddr)
		s.cfg = nodeConfig(t, o, "slave", freeAddr(t), s.proxy.addr(), "")
		s.view = &replicaView{name: s.name, store: func() *core.Store { return s.e.store }}
		c.slaves = append(c.slaves, s)
	}
	c.p.reset(c.masterStore, c.views())
	for _, s := range c.slaves {
		c.startSlave(s)
	}
	// Registered last, so it runs before the stores close: no replicator
	// runs, and no report reads a store, once they do.
	t.Cleanup(func() {
		c.stopAll()
		c.p.reset(nil, nil)
	})
	return c
}

func (c *cluster) masterStore() *core.Store { return c.master.e.store }

func (c *cluster) views() []*replicaView {
	var vs []*replicaView
	for _, s := range c.slaves {
		vs = append(vs, s.view)
	}
	return vs
}

// startMaster starts a new replicator instance on the master's store.
func (c *cluster) startMaster() {
	c.t.Helper()
	m := c.master
	if c.p == nil {
		c.p = newPromise(0, c.o.replicaFlush) // need is known after Configure
	}
	m.host = &checkedHost{Host: m.e.host, p: c.p}
	rp := c.newPlugin(c.t.std())
	m.lc = start(c.t, rp, m.cfg, m.host)
	c.pol = rp.AckPolicy()
	c.ack = storehost.NewAckPolicy(sdk.FlushPolicy{}, c.pol)
	c.need = max(1, c.pol.WaitReplicas)
	c.p.mu.Lock()
	c.p.need = c.need
	c.p.mu.Unlock()
}

// startSlave starts a new replicator instance on a slave's store.
func (c *cluster) startSlave(s *member) {
	c.t.Helper()
	s.lc = start(c.t, c.newPlugin(c.t.std()), s.cfg, &replicaHost{Host: s.e.host, p: c.p, r: s.view})
}

// restartSlave stops a slave's replicator, closes and reopens its store,
// and starts a new replicator instance on it.
func (c *cluster) restartSlave(s *member) {
	c.t.Helper()
	s.lc.crash()
	c.p.setDown(s.view, true)
	s.e.close()
	s.e.open()
	c.p.setDown(s.view, false)
	c.startSlave(s)
}

// restartMaster stops the master's replicator, closes and reopens its
// store, and starts a new replicator instance on it at the same address.
func (c *cluster) restartMaster() {
	c.t.Helper()
	c.master.lc.stop() // no report reads the master's store while it is closed
	c.master.e.close()
	c.master.e.open()
	c.p.masterRestarted()
	c.startMaster()
}

// powerCutSlave cuts the power of a slave whose store is on a CrashFS
// (its unflushed bytes vanish), reopens its store and returns; the caller
// starts its replicator again.
func (c *cluster) powerCutSlave(s *member) {
	c.t.Helper()
	s.e.powerCut(func() {
		// Nothing reaches its disk any more: what it holds now is all it
		// can have acknowledged.
		c.p.setDown(s.view, true)
		s.lc.crash()
	})
	c.p.setDown(s.view, false)
}

// stopAll stops every replicator (a crashed one is already stopped).
func (c *cluster) stopAll() {
	for _, s := range c.slaves {
		if s.lc != nil {
			s.lc.stop()
		}
	}
	c.master.lc.stop()
}

// inSync waits until the master's host counts at least need in-sync
// replicas (what a waiting ack needs), up to d.
func (c *cluster) inSync(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for eventually(time.Until(deadline), func() bool { return c.master.e.host.InSync() >= c.need }) {
		time.Sleep(50 * time.Millisecond) // and still after a reconnection's churn
		if c.master.e.host.InSync() >= c.need {
			return true
		}
	}
	return false
}

// converged waits until every slave in ss holds exactly the master's log.
func (c *cluster) converged(ss []*member, d time.Duration) bool {
	return eventually(d, func() bool {
		mc := c.masterStore().Positions().Committed
		for _, s := range ss {
			if s.e.store.Positions().Committed != mc {
				return false
			}
		}
		return true
	})
}

// checkReports fails the test with the violations the master's hosts saw
// (reports still waiting for a down replica are judged now).
func (c *cluster) checkReports(hosts []*checkedHost) {
	c.t.Helper()
	c.p.judgePending()
	for _, h := range hosts {
		n, errs := h.violations()
		for _, e := range errs {
			c.t.Error(e)
		}
		if n > len(errs) {
			c.t.Errorf("... and %d more reports acknowledged bytes the replicas did not hold", n-len(errs))
		}
	}
}
