package replication

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
)

// pair starts a master and a slave on fresh stores.
func pair(t *testing.T, o Options) (m, s *tnode) {
	t.Helper()
	dirs := tempDirs(t, "master", "slave")
	m = newNode(t, "master", dirs[0], o.VisibleAfterReplicated)
	s = newNode(t, "slave", dirs[1], false)
	m.start(RoleMaster, "", o)
	s.start(RoleSlave, m.repl.Addr(), o)
	eventually(t, 5*time.Second, "the master's start fence to lift", func() bool { f, _ := m.host.Fenced(); return !f })
	return m, s
}

func waitCaughtUp(t *testing.T, m, s *tnode) {
	t.Helper()
	eventually(t, 15*time.Second, "slave to catch up", func() bool {
		return s.store.Positions().Committed == m.store.Positions().Committed
	})
}

func TestReplicationIdenticalOffsetsAndQueues(t *testing.T) {
	m, s := pair(t, fastOpts())
	// The master's empty log is fenced until the first replica's handshake.
	eventually(t, 5*time.Second, "fence to lift", func() bool { f, _ := m.host.Fenced(); return !f })
	m.appendN(1500, 900, "a") // ~1.4 MiB: crosses segments, so BLANK records are replicated
	waitCaughtUp(t, m, s)
	m.appendN(1500, 1100, "b")
	waitCaughtUp(t, m, s)
	sameLog(t, m.store, s.store)
	sameQueues(t, m.store, s.store)
	if !slices.Equal(m.store.Epochs().Entries(), s.store.Epochs().Entries()) {
		t.Fatalf("epochs differ: master %v slave %v", m.store.Epochs().Entries(), s.store.Epochs().Entries())
	}
	// Async policy: the acked offset follows the slave; the state lists it.
	eventually(t, 5*time.Second, "acked offset", func() bool {
		return m.host.Replication().AckedOffset == m.store.Positions().Committed
	})
	st := m.host.Replication()
	if st.InSync != 1 || len(st.Replicas) != 1 || st.Replicas[0].ID != "slave" || !st.Replicas[0].InSync || st.Replicas[0].LagBytes != 0 {
		t.Fatalf("replication state %+v", st)
	}
	// A slave reports itself fenced: its host must not take writes.
	if f, why := s.host.Fenced(); !f || !strings.Contains(why, "slave") {
		t.Fatalf("slave host fenced=%v %q", f, why)
	}
	var status map[string]any
	b, _ := m.repl.Status(context.Background())
	if err := json.Unmarshal(b, &status); err != nil || status["addr"] != m.repl.Addr() || status["role"] != "master" {
		t.Fatalf("status %s: %v", b, err)
	}
	mt, _ := m.repl.WriteMetrics(context.Background())
	for _, want := range []string{`keel_replication_replica_lag_bytes{replica="slave"`, "keel_replication_in_sync 1", "keel_replication_replica_lag_seconds"} {
		if !strings.Contains(string(mt), want) {
			t.Fatalf("metrics lack %q:\n%s", want, mt)
		}
	}
}

func TestFullCopyFromMasterMinimum(t *testing.T) {
	dirs := tempDirs(t, "master", "slave")
	o := fastOpts()
	o.StartFenced = StartFencedNever
	m := newNode(t, "master", dirs[0], false)
	m.start(RoleMaster, "", o)
	m.appendN(4000, 1000, "old") // ~4 MiB over 4+ segments
	if _, err := m.store.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "dispatch", func() bool { p := m.store.Positions(); return p.Dispatched == p.Committed })
	if n, err := m.store.Clean(true); err != nil || n == 0 {
		t.Fatalf("clean: %d %v", n, err)
	}
	min := m.store.Positions().Min
	if min == 0 {
		t.Fatal("retention deleted nothing")
	}
	s := newNode(t, "slave", dirs[1], false)
	s.start(RoleSlave, m.repl.Addr(), o)
	waitCaughtUp(t, m, s)
	if got := s.store.Positions().Min; got != min {
		t.Fatalf("slave min %d, master min %d (not only the last segment: a full copy)", got, min)
	}
	sameLog(t, m.store, s.store)
	sameQueues(t, m.store, s.store)
}

func TestSyncAckWaitsForSlave(t *testing.T) {
	o := fastOpts()
	o.WaitReplicas = 1
	o.AckOn = AckFlushed
	m, s := pair(t, o)
	eventually(t, 5*time.Second, "replica in sync", func() bool { return m.host.InSync() == 1 })
	for i := 0; i < 50; i++ {
		end := m.appendN(1, 200, "sync")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := m.host.WaitReplicated(ctx, end)
		cancel()
		if err != nil {
			t.Fatalf("wait replicated %d: %v", end, err)
		}
		// The ack means the slave has (and, with ack_on = flushed, fsynced) the bytes.
		if p := s.store.Positions(); p.Committed < end || p.Flushed < end {
			t.Fatalf("acked %d but the slave has committed %d flushed %d", end, p.Committed, p.Flushed)
		}
	}
	if p := m.repl.AckPolicy(); p.WaitReplicas != 1 || p.Timeout != 3*time.Second {
		t.Fatalf("policy %+v", p)
	}
}

func TestSlaveStoppedAndLinkCut(t *testing.T) {
	dirs := tempDirs(t, "master", "slave")
	o := fastOpts()
	o.WaitReplicas = 1
	m := newNode(t, "master", dirs[0], false)
	m.start(RoleMaster, "", o)
	px := newProxy(t, m.repl.Addr())
	s := newNode(t, "slave", dirs[1], false)
	s.start(RoleSlave, px.addr(), o)
	eventually(t, 5*time.Second, "replica in sync", func() bool { return m.host.InSync() == 1 })
	waitFor := func(end int64, d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return m.host.WaitReplicated(ctx, end)
	}
	if err := waitFor(m.appendN(10, 100, "ok"), 3*time.Second); err != nil {
		t.Fatal(err)
	}

	// A black-holed link: the replica stays in the set for a while, the
	// wait times out (FLUSH_SLAVE_TIMEOUT), the record stays stored.
	px.pause()
	end := m.appendN(1, 100, "lost-ack")
	if err := waitFor(end, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait during a paused link: %v", err)
	}
	if m.store.Positions().Committed < end {
		t.Fatal("record not stored")
	}
	// Past the idle timeout the master drops the replica: none in sync
	// (SLAVE_NOT_AVAILABLE at once).
	eventually(t, 5*time.Second, "replica to leave the in-sync set", func() bool { return m.host.InSync() == 0 })
	// Cut, then restore: the slave reconnects with backoff and catches up.
	px.cutLink()
	time.Sleep(50 * time.Millisecond)
	px.restore()
	if err := waitFor(end, 10*time.Second); err != nil {
		t.Fatalf("after the link came back: %v", err)
	}
	waitCaughtUp(t, m, s)
	sameLog(t, m.store, s.store)

	// A stopped slave closes its connection: it leaves the set at once.
	s.stopRepl()
	eventually(t, 3*time.Second, "stopped replica to leave the in-sync set", func() bool { return m.host.InSync() == 0 })
	if err := waitFor(m.appendN(1, 100, "nobody"), 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with no replica: %v", err)
	}
}

func TestMaxLagLeavesInSyncSet(t *testing.T) {
	dirs := tempDirs(t, "master", "slave")
	o := fastOpts()
	o.WaitReplicas = 1
	o.MaxLag = 64 << 10
	m := newNode(t, "master", dirs[0], false)
	m.start(RoleMaster, "", o)
	px := newProxy(t, m.repl.Addr())
	s := newNode(t, "slave", dirs[1], false)
	s.start(RoleSlave, px.addr(), o)
	eventually(t, 5*time.Second, "replica in sync", func() bool { return m.host.InSync() == 1 })
	px.pause()
	m.appendN(200, 1000, "lag") // 200 KB > max_lag
	eventually(t, 3*time.Second, "lagging replica to leave the set", func() bool {
		st := m.host.Replication()
		return st.InSync == 0 && len(st.Replicas) == 1 && !st.Replicas[0].InSync && st.Replicas[0].LagBytes > o.MaxLag
	})
	px.restore()
	eventually(t, 10*time.Second, "replica back in the set", func() bool { return m.host.InSync() == 1 })
}

func TestWrongSecretRefused(t *testing.T) {
	dirs := tempDirs(t, "master", "slave")
	o := fastOpts()
	m := newNode(t, "master", dirs[0], false)
	m.start(RoleMaster, "", o)
	m.appendN(10, 100, "x")

	s := newNode(t, "slave", dirs[1], false)
	r := NewNode()
	if err := r.Setup(sdk.Config{Name: "bad", Role: RoleSlave, PeerAddr: m.repl.Addr(), Secret: "wrong", DataDir: s.dataDir}, o); err != nil {
		t.Fatal(err)
	}
	r.log = testLogger(t)
	if err := r.Start(context.Background(), s.host); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	eventually(t, 5*time.Second, "auth failures", func() bool { return m.repl.met.authFailures.Get() >= 2 })
	if s.store.Positions().Committed != 0 || m.host.InSync() != 0 {
		t.Fatal("an unauthenticated slave received data")
	}
	var st map[string]any
	b, _ := r.Status(context.Background())
	_ = json.Unmarshal(b, &st)
	if !strings.Contains(st["last_error"].(string), "auth") {
		t.Fatalf("slave status %s", b)
	}

	// A peer that does not speak the protocol at all.
	nc, err := net.Dial("tcp", m.repl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 1024)
	for {
		if _, err := nc.Read(buf); err != nil {
			break // closed by the master
		}
	}
	nc.Close()

	// A fake master without the secret is refused by the slave before it
	// sends anything.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		ServerAuth(NewConn(c, DefaultMaxFrame, time.Second), "not-the-secret", "fake")
	}()
	cc, _ := net.Dial("tcp", ln.Addr().String())
	if _, err := ClientAuth(NewConn(cc, DefaultMaxFrame, time.Second), testSecret, "x"); !errors.Is(err, ErrAuth) {
		t.Fatalf("fake master accepted: %v", err)
	}
	cc.Close()
}

func TestLyingSlaveDisconnected(t *testing.T) {
	dirs := tempDirs(t, "master")
	o := fastOpts()
	m := newNode(t, "master", dirs[0], false)
	m.start(RoleMaster, "", o)
	end := m.appendN(10, 100, "x")
	nc, err := net.Dial("tcp", m.repl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(nc, DefaultMaxFrame, 3*time.Second)
	defer c.Close()
	if _, err := ClientAuth(c, testSecret, "liar"); err != nil {
		t.Fatal(err)
	}
	c.WriteFrame(true, FrameState, State{}.Marshal())
	f, err := c.ExpectFrame(FramePlan)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := DecodePlan(f.Payload)
	c.WriteFrame(true, FrameAck, Ack{Received: p.From}.Marshal())
	// Claim far more than the master has.
	c.WriteFrame(true, FrameAck, Ack{Received: end + 1<<30}.Marshal())
	var perr *PeerError
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatalf("connection closed without an error frame: %v", err)
		}
		if f.Type == FrameError {
			em, _ := DecodeErrorMsg(f.Payload)
			perr = &PeerError{Code: em.Code, Reason: em.Reason}
			break
		}
	}
	if perr.Code != CodeLying {
		t.Fatalf("error %v", perr)
	}
	for {
		if _, err := c.ReadFrame(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("connection still open")
			}
			break
		}
	}
	if m.repl.met.rejected.Get() != 1 || m.host.Replication().AckedOffset > end {
		t.Fatalf("rejected %d acked %d", m.repl.met.rejected.Get(), m.host.Replication().AckedOffset)
	}
}

func TestFrameBoundsOnTheWire(t *testing.T) {
	dirs := tempDirs(t, "master")
	m := newNode(t, "master", dirs[0], false)
	m.start(RoleMaster, "", fastOpts())
	nc, err := net.Dial("tcp", m.repl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A hello announcing 2 GiB: refused without waiting for (or allocating) it.
	nc.Write([]byte{byte(FrameClientHello), 0x80, 0, 0, 0})
	nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := nc.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("master kept the connection open")
			}
			break
		}
	}
}

func TestDivergentTailTruncatedAfterPromotion(t *testing.T) {
	o := fastOpts()
	a, b := pair(t, o)
	a.appendN(300, 500, "shared")
	waitCaughtUp(t, a, b)
	shared := a.store.Positions().Committed

	// B is promoted while A (not yet told) keeps writing: split brain.
	epoch, err := b.repl.Promote(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if epoch <= a.store.Epochs().Entries()[len(a.store.Epochs().Entries())-1].Epoch {
		t.Fatalf("promotion epoch %d not above the old master's %v", epoch, a.store.Epochs().Entries())
	}
	if f, _ := b.host.Fenced(); f {
		t.Fatal("promoted node still fenced")
	}
	a.appendN(50, 500, "old-master-tail") // divergent: never acknowledged by B
	b.appendN(80, 300, "new-master")
	bAddr := b.repl.Addr()

	// The old master rejoins as slave: its divergent tail is cut at the
	// consistent point (the promotion offset) and it follows B.
	if err := a.repl.Demote(context.Background(), bAddr); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, b, a)
	sameLog(t, b.store, a.store)
	sameQueues(t, b.store, a.store)
	if a.repl.met.truncations.Get() != 1 {
		t.Fatalf("truncations %d", a.repl.met.truncations.Get())
	}
	if !slices.Equal(a.store.Epochs().Entries(), b.store.Epochs().Entries()) {
		t.Fatalf("epochs: old master %v, new master %v", a.store.Epochs().Entries(), b.store.Epochs().Entries())
	}
	if got := b.store.Epochs().Entries(); got[len(got)-1].StartOffset != shared {
		t.Fatalf("promotion epoch starts at %d, want %d", got[len(got)-1].StartOffset, shared)
	}
	if f, _ := a.host.Fenced(); !f {
		t.Fatal("demoted node's host not fenced")
	}
	// B goes on; A follows.
	b.appendN(20, 300, "after")
	waitCaughtUp(t, b, a)
	sameLog(t, b.store, a.store)
}

func TestReturningOldMasterConfiguredAsSlave(t *testing.T) {
	// Same split brain, but the old master is stopped and restarted by
	// its profile as a slave (no runtime demote).
	o := fastOpts()
	a, b := pair(t, o)
	a.appendN(100, 500, "shared")
	waitCaughtUp(t, a, b)
	if _, err := b.repl.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.appendN(30, 500, "tail")
	a.stopRepl()
	b.appendN(30, 700, "new")
	a.start(RoleSlave, b.repl.Addr(), o)
	waitCaughtUp(t, b, a)
	sameLog(t, b.store, a.store)
}

func TestMasterBehindSlaveCatchesUp(t *testing.T) {
	o := fastOpts()
	a, b := pair(t, o)
	a.appendN(2500, 1000, "data") // ~2.5 MiB
	waitCaughtUp(t, a, b)
	// Consumers committed offsets on the slave while the master is down.
	if err := b.store.Meta().ConsumerOffsets.Commit("g", "TopicA", 1, 400); err != nil {
		t.Fatal(err)
	}
	want := b.store.Positions()
	slaveEpochs := b.store.Epochs().Entries()

	// The master's disk is lost: wipe its directory and restart it empty.
	a.close()
	if err := os.RemoveAll(a.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(a.dataDir); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(a.dataDir, 0o755)
	b.stopRepl() // keep the slave away until the master's first state is checked
	a.open()
	a.start(RoleMaster, "", o)
	if f, why := a.host.Fenced(); !f || !strings.Contains(why, "empty log") {
		t.Fatalf("restarted empty master not fenced: %v %q", f, why)
	}
	// The slave comes back: the master pulls everything from it first.
	b.start(RoleSlave, a.repl.Addr(), o)
	eventually(t, 15*time.Second, "master to catch up and unfence", func() bool {
		f, _ := a.host.Fenced()
		return !f && a.store.Positions().Committed == want.Committed
	})
	if a.store.Positions().Min != want.Min {
		t.Fatalf("master min %d, slave min %d", a.store.Positions().Min, want.Min)
	}
	sameLog(t, a.store, b.store)
	sameQueues(t, a.store, b.store)
	// Its history extends the slave's by a new epoch; the slave adopts it.
	ea, eb := a.store.Epochs().Entries(), b.store.Epochs().Entries()
	if len(ea) != len(slaveEpochs)+1 || !slices.Equal(ea[:len(slaveEpochs)], slaveEpochs) || ea[len(ea)-1].StartOffset != want.Committed {
		t.Fatalf("master epochs %v, slave's before %v", ea, slaveEpochs)
	}
	eventually(t, 5*time.Second, "slave to adopt the new epoch", func() bool { return slices.Equal(b.store.Epochs().Entries(), ea) })
	_ = eb
	a.appendN(10, 100, "new")
	waitCaughtUp(t, a, b)
	sameLog(t, a.store, b.store)
	// The slave's consumer offset survived (never reset, never lowered).
	if off, ok := b.store.Meta().ConsumerOffsets.Query("g", "TopicA", 1); !ok || off != 400 {
		t.Fatalf("consumer offset on the slave %d %v", off, ok)
	}
}

func TestConflictFencesUntilForceWrites(t *testing.T) {
	o := fastOpts()
	o.StartFenced = StartFencedNever
	a, b := pair(t, o)
	a.appendN(200, 500, "shared")
	mid := a.store.Positions().Committed
	a.appendN(200, 500, "lost-on-master")
	waitCaughtUp(t, a, b)
	// The master loses its tail (an unflushed page cache after a power
	// cut), restarts without fencing and writes before the slave is back.
	a.stopRepl()
	b.stopRepl()
	if err := a.store.Truncate(mid); err != nil {
		t.Fatal(err)
	}
	a.start(RoleMaster, "", o)
	a.appendN(30, 500, "conflicting")
	b.start(RoleSlave, a.repl.Addr(), o)
	eventually(t, 5*time.Second, "conflict to fence the master", func() bool {
		f, why := a.host.Fenced()
		return f && strings.Contains(why, "ForceWrites")
	})
	// Nothing of the slave's is touched meanwhile.
	if b.store.Positions().Committed <= mid || b.repl.met.truncations.Get() != 0 {
		t.Fatal("slave truncated while the master is fenced")
	}
	// The operator keeps the master's log.
	if err := a.repl.ForceWrites(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f, _ := a.host.Fenced(); f {
		t.Fatal("still fenced after ForceWrites")
	}
	waitCaughtUp(t, a, b)
	sameLog(t, a.store, b.store)
	if b.repl.met.truncations.Get() != 1 {
		t.Fatalf("slave truncations %d", b.repl.met.truncations.Get())
	}
}

func TestMetadataSyncMergesOffsetsByMax(t *testing.T) {
	o := fastOpts()
	a, b := pair(t, o)
	a.appendN(10, 100, "x")
	ma, mb := a.store.Meta().ConsumerOffsets, b.store.Meta().ConsumerOffsets
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ma.Commit("g", "TopicA", 0, 10))
	must(ma.Commit("g", "TopicA", 1, 3))
	must(mb.Commit("g", "TopicA", 0, 20)) // committed on the slave while the master was away
	must(mb.Commit("g2", "TopicA", 2, 5))
	eventually(t, 5*time.Second, "offsets to sync", func() bool {
		v1, _ := mb.Query("g", "TopicA", 1)
		return v1 == 3
	})
	time.Sleep(3 * o.SyncMetaInterval)
	if v, _ := mb.Query("g", "TopicA", 0); v != 20 {
		t.Fatalf("slave offset lowered to %d", v)
	}
	if v, _ := mb.Query("g2", "TopicA", 2); v != 5 {
		t.Fatalf("slave-only offset lost: %d", v)
	}
	must(ma.Commit("g", "TopicA", 0, 30))
	eventually(t, 5*time.Second, "higher master offset", func() bool { v, _ := mb.Query("g", "TopicA", 0); return v == 30 })
}

func TestVisibleAfterReplicated(t *testing.T) {
	dirs := tempDirs(t, "master", "slave")
	o := fastOpts()
	o.WaitReplicas = 1
	o.VisibleAfterReplicated = true
	o.StartFenced = StartFencedNever
	m := newNode(t, "master", dirs[0], true)
	m.start(RoleMaster, "", o)
	m.appendN(20, 100, "hidden")
	time.Sleep(100 * time.Millisecond)
	if got := m.store.MaxQueueOffset("TopicA", 0); got != 0 {
		t.Fatalf("consumers see %d unreplicated records", got)
	}
	s := newNode(t, "slave", dirs[1], false)
	s.start(RoleSlave, m.repl.Addr(), o)
	eventually(t, 5*time.Second, "records visible after replication", func() bool { return m.store.MaxQueueOffset("TopicA", 0) == 5 })
}

func TestPromoteOnMasterAndForceOnSlave(t *testing.T) {
	a, b := pair(t, fastOpts())
	if _, err := a.repl.Promote(context.Background()); err == nil {
		t.Fatal("promote on a master succeeded")
	}
	if err := b.repl.ForceWrites(context.Background()); !errors.Is(err, sdk.ErrNotSupported) {
		t.Fatalf("force on a slave: %v", err)
	}
}

func TestThreeNodes(t *testing.T) {
	o := fastOpts()
	o.WaitReplicas = 2
	dirs := tempDirs(t, "m", "s1", "s2")
	m := newNode(t, "m", dirs[0], false)
	m.start(RoleMaster, "", o)
	s1 := newNode(t, "s1", dirs[1], false)
	s1.start(RoleSlave, m.repl.Addr(), o)
	end := m.appendN(100, 300, "x")
	time.Sleep(200 * time.Millisecond)
	if got := m.host.Replication().AckedOffset; got >= end {
		t.Fatalf("acked %d with one of two replicas", got)
	}
	s2 := newNode(t, "s2", dirs[2], false)
	s2.start(RoleSlave, m.repl.Addr(), o)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.host.WaitReplicated(ctx, end); err != nil {
		t.Fatal(err)
	}
	sameLog(t, m.store, s1.store)
	sameLog(t, m.store, s2.store)
}
