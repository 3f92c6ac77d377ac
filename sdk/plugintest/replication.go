package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
)

// RunReplication runs the replicator conformance suite. newPlugin returns
// a fresh, unconfigured instance each time it is called; the suite runs a
// master-role and a slave-role instance on two stores, the master
// listening on a free 127.0.0.1 port (Config.Addr) and the slave given it
// as Config.PeerAddr, both with the same Config.Secret. The subtests check
// that:
//
//   - RejectsUnknownConfigKey: Configure refuses an unknown key in
//     [replication.config] with sdk.ErrInvalidConfig naming the key.
//   - MasterToSlave: bytes appended on the master by concurrent producers
//     appear on the slave at identical offsets, byte for byte; when the
//     policy waits for one replica every ack (the host's WaitReplicated on
//     the record's end) completes within the policy's Timeout; every
//     ReportReplication's AckedOffset is at most the master's committed
//     offset and never decreases, and reaches the committed offset when
//     the policy waits for one replica; a stopped slave stops copying, and
//     a new slave instance on the same store resumes from its offset; Stop
//     on both ends returns promptly and without error.
//   - RejectsWrongSecret: a slave with another secret copies nothing.
//   - Promise: the core promise, read from the replicas' own stores and
//     never from the plugin's report: whenever the master's replicator
//     reports an AckedOffset, at least max(1, WaitReplicas) replica stores
//     hold every byte of the master's log below it at the same offsets
//     (flushed there too, with WithReplicaAckOnFlush). Producers are
//     acknowledged by the host's rule (storehost.Host.Ack: SLAVE_NOT_AVAILABLE
//     at once while too few replicas are in sync). Slaves1, Slaves2 and
//     Slaves3 run steady load with that many slaves: with fewer slaves
//     than the policy waits for every ack must be SLAVE_NOT_AVAILABLE, at
//     once; otherwise every ack must be SEND_OK. Faults runs, each on a
//     fresh cluster with as many slaves as the policy waits for (at least
//     one), each slave reaching the master through a TCP proxy the suite
//     controls on 127.0.0.1: Delay (every chunk delayed each way),
//     Partition (nothing forwarded, connections kept, then reset),
//     SlaveRestart and MasterRestart (replicator and store, under load for
//     the slave), SlavePowerCut (the slave's store on a vfs.CrashFS loses
//     its unflushed bytes; with WithReplicaAckOnFlush no acknowledged
//     record may be lost) and DivergentTail (the master appends records no
//     slave has and stops; a slave takes over as master and the old master
//     rejoins as its slave with that tail, which must not be counted; the
//     verdict, repaired or fenced, waits for the new master's answer to
//     the old master's handshake). Once
//     each fault heals, every ack must be SEND_OK and the replicas must
//     catch up. Failures give the acknowledged-but-not-held record counts
//     per fault.
func RunReplication(t *testing.T, newPlugin func(t *testing.T) sdk.Replicator, opts ...Option) {
	runReplication(testT{t}, newPlugin, buildOptions(opts))
}

// runReplication is RunReplication's body, on a real test or a recorder.
func runReplication(t suiteT, newPlugin func(t *testing.T) sdk.Replicator, o options) {
	t.run("RejectsUnknownConfigKey", func(t suiteT) {
		checkRejectsUnknownKey(t, newPlugin(t.std()), writeProfile(t, "replication", "role = \"master\"\n", withUnknownKey(o.config)))
	})
	t.run("MasterToSlave", func(t suiteT) { replMasterToSlave(t, newPlugin, o) })
	t.run("RejectsWrongSecret", func(t suiteT) { replWrongSecret(t, newPlugin, o) })
	t.run("Promise", func(t suiteT) { replPromise(t, newPlugin, o) })
}

// ackWatch is the Host a master-role replicator gets: it checks every
// ReportReplication against the store before passing it on.
type ackWatch struct {
	sdk.Host
	store   *core.Store
	mu      sync.Mutex
	last    int64
	reports int
	bad     []string
}

func (w *ackWatch) ReportReplication(ctx context.Context, st sdk.ReplicationState) error {
	c := w.store.Positions().Committed
	w.mu.Lock()
	if st.AckedOffset > c && len(w.bad) < 5 {
		w.bad = append(w.bad, fmt.Sprintf("ReportReplication AckedOffset %d beyond the master's committed offset %d", st.AckedOffset, c))
	}
	if st.AckedOffset < w.last && len(w.bad) < 5 {
		w.bad = append(w.bad, fmt.Sprintf("ReportReplication AckedOffset went back from %d to %d", w.last, st.AckedOffset))
	}
	w.last = max(w.last, st.AckedOffset)
	w.reports++
	w.mu.Unlock()
	return w.Host.ReportReplication(ctx, st)
}

func (w *ackWatch) check(t testing.TB) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.bad {
		t.Error(b)
	}
}

type replNode struct {
	e   *env
	cfg sdk.Config
	h   *ackWatch
}

func newReplNode(t testing.TB, o options, role, addr, peer, secret string) *replNode {
	e := newEnv(t, o, false)
	extra := fmt.Sprintf("role = %q\n", role)
	if role == "slave" {
		extra += fmt.Sprintf("master_addr = %q\n", peer)
	}
	if secret != "" {
		extra += fmt.Sprintf("secret = %q\n", secret)
	}
	cfg := writeProfile(t, "replication", extra, o.config)
	cfg.Role, cfg.Addr, cfg.PeerAddr, cfg.Secret = role, addr, peer, secret
	return &replNode{e: e, cfg: cfg, h: &ackWatch{Host: e.host, store: e.store}}
}

// logBytes reads [Min, Committed) of s.
func logBytes(t testing.TB, s *core.Store) (int64, []byte) {
	t.Helper()
	p := s.Positions()
	var out []byte
	for off := p.Min; off < p.Committed; {
		b, err := s.ReadLog(off, 1<<20)
		if err != nil {
			t.Fatalf("read log at %d: %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		out = append(out, b...)
		off += int64(len(b))
	}
	return p.Min, out
}

// sameLog waits until the slave's log equals the master's.
func sameLog(t testing.TB, master, slave *core.Store, within time.Duration) {
	t.Helper()
	if !eventually(within, func() bool {
		return slave.Positions().Committed == master.Positions().Committed
	}) {
		t.Fatalf("slave at %d, master at %d after %v", slave.Positions().Committed, master.Positions().Committed, within)
	}
	mMin, mb := logBytes(t, master)
	sMin, sb := logBytes(t, slave)
	if mMin != sMin {
		t.Errorf("slave log starts at %d, master's at %d", sMin, mMin)
	}
	if !bytes.Equal(mb, sb) {
		i := 0
		for i < len(mb) && i < len(sb) && mb[i] == sb[i] {
			i++
		}
		t.Fatalf("slave log differs from the master's at offset %d (lengths %d, %d)", mMin+int64(i), len(sb), len(mb))
	}
}

func replMasterToSlave(t suiteT, newPlugin func(t *testing.T) sdk.Replicator, o options) {
	const secret = "plugintest-secret"
	maddr := freeAddr(t)
	m := newReplNode(t, o, "master", maddr, "", secret)
	s := newReplNode(t, o, "slave", freeAddr(t), maddr, secret)
	mp := newPlugin(t.std())
	mlc := start(t, mp, m.cfg, m.h)
	pol := mp.AckPolicy()
	sp := newPlugin(t.std())
	slc := start(t, sp, s.cfg, s.h)
	wait := pol.Timeout
	if pol.WaitReplicas > 0 && wait <= 0 {
		t.Errorf("AckPolicy %+v waits for replicas but has no Timeout", pol)
	}
	if wait <= 0 {
		wait = 10 * time.Second
	}

	produce := func(tag string, waitAcks bool) {
		var wg sync.WaitGroup
		for g := 0; g < o.producers; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < o.perProducer; i++ {
					r, err := m.e.store.Append(message("ReplT", int32(g%4), fmt.Sprintf("%s-p%d-%d", tag, g, i), fmt.Sprintf("k%d", i%7)))
					if err != nil {
						t.Errorf("append on master: %v", err)
						return
					}
					if !waitAcks {
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), wait)
					err = m.e.host.WaitReplicated(ctx, r.End())
					cancel()
					if err != nil {
						t.Errorf("record ending at %d not acknowledged by replicas within %v (policy %+v, last report %+v): %v",
							r.End(), wait, pol, m.e.host.Replication(), err)
						return
					}
				}
			}(g)
		}
		wg.Wait()
	}

	// One slave can satisfy only a policy that waits for one replica;
	// Promise checks the others with as many slaves as they wait for.
	oneWaits := pol.WaitReplicas == 1
	produce("a", oneWaits)
	sameLog(t, m.e.store, s.e.store, 10*time.Second)
	if oneWaits {
		c := m.e.store.Positions().Committed
		if !eventually(wait, func() bool { return m.e.host.Replication().AckedOffset >= c }) {
			t.Errorf("AckedOffset %d never reached the committed offset %d", m.e.host.Replication().AckedOffset, c)
		}
	}

	// A stopped slave copies nothing more; a new instance resumes.
	slc.stop()
	before := s.e.store.Positions().Committed
	produce("b", false)
	time.Sleep(200 * time.Millisecond)
	if after := s.e.store.Positions().Committed; after != before {
		t.Errorf("slave log grew from %d to %d after its replicator stopped", before, after)
	}
	sp2 := newPlugin(t.std())
	slc2 := start(t, sp2, s.cfg, s.h)
	sameLog(t, m.e.store, s.e.store, 10*time.Second)
	produce("c", oneWaits)
	sameLog(t, m.e.store, s.e.store, 10*time.Second)

	slc2.stop()
	mlc.stop()
	m.h.check(t)
	s.h.check(t)
	m.h.mu.Lock()
	t.Logf("policy %+v: %d bytes replicated, %d ReportReplication calls", pol, m.e.store.Positions().Committed, m.h.reports)
	m.h.mu.Unlock()
}

func replWrongSecret(t suiteT, newPlugin func(t *testing.T) sdk.Replicator, o options) {
	maddr := freeAddr(t)
	m := newReplNode(t, o, "master", maddr, "", "the-right-secret")
	s := newReplNode(t, o, "slave", freeAddr(t), maddr, "a-wrong-secret")
	mlc := start(t, newPlugin(t.std()), m.cfg, m.h)
	slc := start(t, newPlugin(t.std()), s.cfg, s.h)
	for i := 0; i < 50; i++ {
		if _, err := m.e.store.Append(message("SecretT", 0, fmt.Sprint(i), "")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if c := s.e.store.Positions().Committed; c != 0 {
		t.Errorf("a slave with the wrong secret copied the log up to %d", c)
	}
	if a := m.e.host.Replication().AckedOffset; a != 0 {
		t.Errorf("the master reported AckedOffset %d with only an unauthenticated slave", a)
	}
	slc.stop()
	mlc.stop()
	m.h.check(t)
}
