package replication

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
)

// slowAppend delays every AppendLog, so that a catch-up's pull lasts long
// enough for any stream running meanwhile to send what it appends.
type slowAppend struct {
	sdk.Host
	delay time.Duration
}

func (h slowAppend) AppendLog(ctx context.Context, off int64, data []byte) error {
	time.Sleep(h.delay)
	return h.Host.AppendLog(ctx, off, data)
}

// TestCatchUpWhileAnotherReplicaStreams: a master that lost its tail (a
// restart, not a takeover, so the replica's tail is not superseded) has
// one replica streaming when another rejoins holding that tail, which
// the master catches up from. The streaming replica must not receive the
// pulled bytes under the restart epoch the catch-up drops (it would then
// look divergent on its next handshake and fence the master for good):
// the master ends unfenced, and both replicas end with its log.
func TestCatchUpWhileAnotherReplicaStreams(t *testing.T) {
	o := fastOpts()
	o.StartFenced = StartFencedNever
	dirs := tempDirs(t, "a", "b", "c")
	a := newNode(t, "a", dirs[0], false)
	b := newNode(t, "b", dirs[1], false)
	c := newNode(t, "c", dirs[2], false)
	a.start(RoleMaster, "", o)
	b.start(RoleSlave, a.repl.Addr(), o)
	c.start(RoleSlave, a.repl.Addr(), o)
	shared := a.appendN(200, 500, "shared")
	waitCaughtUp(t, a, b)
	waitCaughtUp(t, a, c)
	c.stopRepl()
	tail := a.appendN(400, 1000, "tail") // b has it, c does not
	waitCaughtUp(t, a, b)
	a.stopRepl()
	b.stopRepl()
	if err := a.store.Truncate(shared); err != nil { // a lost its tail
		t.Fatal(err)
	}

	a.wrap = func(h sdk.Host) sdk.Host { return slowAppend{Host: h, delay: 5 * time.Millisecond} }
	a.start(RoleMaster, "", o) // a restart epoch at shared, no takeover
	c.start(RoleSlave, a.repl.Addr(), o)
	eventually(t, 5*time.Second, "c to stream from a", func() bool { return a.host.Replication().InSync == 1 })
	b.start(RoleSlave, a.repl.Addr(), o)

	eventually(t, 15*time.Second, "a to catch up from b and unfence", func() bool {
		f, _ := a.host.Fenced()
		return !f && a.store.Positions().Committed == tail
	})
	// c handshakes again, as after any reconnect: with the pulled bytes
	// streamed to it under the dropped epoch it would fence a now.
	c.stopRepl()
	c.start(RoleSlave, a.repl.Addr(), o)
	a.appendN(20, 300, "new")
	eventually(t, 15*time.Second, "both replicas to hold a's log", func() bool {
		if f, why := a.host.Fenced(); f && strings.Contains(why, "replica") {
			t.Fatalf("a replica fenced a after the catch-up: %s", why)
		}
		end := a.store.Positions().Committed
		return b.store.Positions().Committed == end && c.store.Positions().Committed == end
	})
	sameLog(t, a.store, c.store)
	sameLog(t, a.store, b.store)
}

// TestPromotedMasterCutsOldMasterTailBeforeWriting: a slave promoted by
// its profile (a takeover epoch at the shared end) that has not written
// yet when the old master rejoins with a longer tail keeps its own log:
// the old master's tail is cut, as it is once the new master has written
// (Decide's rule 4), so the outcome does not depend on which came first.
func TestPromotedMasterCutsOldMasterTailBeforeWriting(t *testing.T) {
	o := fastOpts()
	o.StartFenced = StartFencedNever
	dirs := tempDirs(t, "a", "b")
	a := newNode(t, "a", dirs[0], false)
	b := newNode(t, "b", dirs[1], false)
	a.start(RoleMaster, "", o)
	b.start(RoleSlave, a.repl.Addr(), o)
	shared := a.appendN(200, 500, "shared")
	waitCaughtUp(t, a, b)
	a.stopRepl()
	b.stopRepl()
	a.appendN(400, 1000, "old-master-tail") // no replica has it

	b.start(RoleMaster, "", o) // was a slave: a takeover epoch
	a.start(RoleSlave, b.repl.Addr(), o)
	eventually(t, 15*time.Second, "a to stream from b", func() bool { return b.host.Replication().InSync == 1 })
	if f, why := b.host.Fenced(); f {
		t.Fatalf("the promoted master is fenced: %s", why)
	}
	if got := b.store.Positions().Committed; got != shared {
		t.Fatalf("the promoted master's log ends at %d, want %d (its own): it took the old master's tail", got, shared)
	}
	b.appendN(20, 300, "new")
	waitCaughtUp(t, b, a)
	sameLog(t, b.store, a.store)
}

// gatedAppend blocks every AppendLog while its gate is closed: a replica
// that stopped acknowledging without dropping its connection.
type gatedAppend struct {
	sdk.Host
	open *atomic.Bool
}

func (h gatedAppend) AppendLog(ctx context.Context, off int64, data []byte) error {
	for !h.open.Load() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
	return h.Host.AppendLog(ctx, off, data)
}

// TestStalledReplicaLeavesInSyncSetByTime: a replica that holds its
// connection but stops acknowledging leaves the in-sync set once its
// oldest unacknowledged byte is MaxLagTime old, though it lacks far fewer
// than MaxLag bytes, and rejoins once it has caught up.
func TestStalledReplicaLeavesInSyncSetByTime(t *testing.T) {
	o := fastOpts()
	o.StartFenced = StartFencedNever
	o.MaxLagTime = 300 * time.Millisecond
	o.HeartbeatInterval, o.IdleTimeout = time.Second, 30*time.Second // the link stays up throughout
	dirs := tempDirs(t, "a", "b")
	a := newNode(t, "a", dirs[0], false)
	b := newNode(t, "b", dirs[1], false)
	var open atomic.Bool
	open.Store(true)
	b.wrap = func(h sdk.Host) sdk.Host { return gatedAppend{Host: h, open: &open} }
	a.start(RoleMaster, "", o)
	b.start(RoleSlave, a.repl.Addr(), o)
	a.appendN(10, 200, "before")
	waitCaughtUp(t, a, b)
	eventually(t, 5*time.Second, "b in sync", func() bool { return a.host.Replication().InSync == 1 })

	open.Store(false)
	stalled := time.Now()
	a.appendN(5, 200, "stalled") // 1 KB, far below MaxLag
	eventually(t, 5*time.Second, "b to leave the in-sync set", func() bool { return a.host.Replication().InSync == 0 })
	if d := time.Since(stalled); d < o.MaxLagTime {
		t.Fatalf("b left the in-sync set after %v, before max_lag_time %v", d, o.MaxLagTime)
	}
	if st := a.host.Replication(); len(st.Replicas) != 1 || !st.Replicas[0].Connected || st.Replicas[0].LagBytes > DefaultMaxLag {
		t.Fatalf("want b connected and within max_lag bytes while out of sync by time: %+v", st)
	}

	open.Store(true)
	waitCaughtUp(t, a, b)
	eventually(t, 5*time.Second, "b to rejoin the in-sync set", func() bool { return a.host.Replication().InSync == 1 })
}
