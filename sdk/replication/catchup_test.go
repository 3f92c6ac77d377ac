package replication

import (
	"context"
	"strings"
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

// TestCatchUpWhileAnotherReplicaStreams: a slave promoted by its profile
// (a takeover epoch at the shared end) has one replica streaming when the
// old master rejoins with a longer tail, which the new master catches up
// from. The streaming replica must not receive the pulled bytes under
// the takeover epoch the catch-up drops (it would then look divergent on
// its next handshake and fence the master for good): the master stays
// unfenced, and both replicas end with its log.
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
	a.appendN(200, 500, "shared")
	waitCaughtUp(t, a, b)
	waitCaughtUp(t, a, c)
	a.stopRepl()
	b.stopRepl()
	c.stopRepl()
	tail := a.appendN(400, 1000, "old-master-tail") // no replica has it

	b.wrap = func(h sdk.Host) sdk.Host { return slowAppend{Host: h, delay: 5 * time.Millisecond} }
	b.start(RoleMaster, "", o) // was a slave: a takeover epoch
	c.start(RoleSlave, b.repl.Addr(), o)
	eventually(t, 5*time.Second, "c to stream from b", func() bool { return b.host.Replication().InSync == 1 })
	a.start(RoleSlave, b.repl.Addr(), o)

	eventually(t, 15*time.Second, "b to catch up from a and unfence", func() bool {
		f, _ := b.host.Fenced()
		return !f && b.store.Positions().Committed == tail
	})
	b.appendN(20, 300, "new")
	eventually(t, 15*time.Second, "both replicas to hold b's log", func() bool {
		if f, why := b.host.Fenced(); f && strings.Contains(why, "replica") {
			t.Fatalf("a replica fenced b after the catch-up: %s", why)
		}
		end := b.store.Positions().Committed
		return a.store.Positions().Committed == end && c.store.Positions().Committed == end
	})
	sameLog(t, b.store, c.store)
	sameLog(t, b.store, a.store)
}
