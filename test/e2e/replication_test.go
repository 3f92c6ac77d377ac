package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// The replication tests run a master and a slave (and sometimes a third
// node) as real `keel serve` processes from the shipped profiles
// (sync-master/sync-slave, async-master/async-slave), every listener on
// 127.0.0.1 port 0, each with its own temporary data directory, driven by
// the real rocketmq-client-go. The HA link runs through an in-test TCP
// proxy where a test needs to delay, pause or cut it. Logs are compared
// after a clean stop with core.Inspect (what `keel store inspect` prints).

// TestReplicationSyncKill9PromoteRejoin:
//
// Phase 1: producers send continuously to a sync master whose slave is
// behind a proxy adding 20 ms of latency to the master-to-slave direction
// (so the master always holds records its slave has not received yet);
// the master is killed with SIGKILL under that load and the slave promoted
// with `keel admin promote`. Every message acknowledged with SEND_OK must
// be delivered by the promoted node, to a push consumer.
//
// Phase 2: the promoted node takes writes of its own (SLAVE_NOT_AVAILABLE:
// stored, no replica); then the old master restarts on its intact data
// directory as a slave of the promoted node. Its divergent tail (the
// records it held beyond the promoted node's log at the kill) is cut, it
// copies the new master's records, sync acks work again, and after a clean
// stop both logs are identical record for record.
func TestReplicationSyncKill9PromoteRejoin(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	const topic = "E2E_Repl_Failover"

	dm, ds := t.TempDir(), t.TempDir()
	m := startMaster(t, "sync-master.toml", dm, "failover-m")
	proxy := startProxy(t, m.haAddr(), 20*time.Millisecond)
	s := startSlave(t, "sync-slave.toml", ds, "failover-s", proxy.Addr())
	m.waitWritable(1)

	// Phase 1: load, kill -9, promote.
	const producers = 6
	var sps []*streamProducer
	for i := 0; i < producers; i++ {
		p := newProducer(t, m.Namesrv, fmt.Sprintf("failover-p%d", i))
		sps = append(sps, startStreamProducer(p, topic, fmt.Sprintf("fo%d", i)))
	}
	acks := func() int {
		n := 0
		for _, sp := range sps {
			n += sp.ackCount()
		}
		return n
	}
	t0 := time.Now()
	if err := waitFor(30*time.Second, func() bool { return time.Since(t0) > 2*time.Second && acks() >= 300 }); err != nil {
		t.Fatalf("phase 1: sync producers got only %d SEND_OK in %v (status %v)", acks(), time.Since(t0), m.mustStatus())
	}
	before := m.mustStatus()
	// The link fails with the master: pause it (what is in flight stays in
	// the proxy), kill -9 the master, then drop what the proxy held.
	proxy.pause()
	m.kill()
	proxy.cut()
	killedAt := time.Now()
	for _, sp := range sps {
		close(sp.stop)
	}
	for _, sp := range sps {
		<-sp.done
	}
	var acked, attempted []string
	notOK := map[string]int{}
	for _, sp := range sps {
		sp.mu.Lock()
		acked = append(acked, sp.acked...)
		attempted = append(attempted, sp.attempted...)
		for st, n := range sp.notOK {
			notOK[statusName(st)] += n
		}
		sp.mu.Unlock()
	}
	t.Logf("phase 1: killed the master (epoch %d, committed %d, acked %d) with %d messages attempted, %d SEND_OK, other statuses %v; producers done %v after the kill",
		before.Epoch, before.committed(), before.Replication.AckedOffset, len(attempted), len(acked), notOK, time.Since(killedAt).Round(time.Millisecond))

	sBefore := s.mustStatus()
	if sBefore.Role != "slave" {
		t.Fatalf("phase 1: the slave reports role %q before promotion", sBefore.Role)
	}
	sEnd := sBefore.committed()
	out, err := adminCLI(t, "promote", s.Admin)
	if err != nil {
		t.Fatalf("phase 1: keel admin promote --admin %s: %v\n%s", s.Admin, err, out)
	}
	promoted := s.waitStatus(10*time.Second, "the promoted slave reporting role master", func(st *replStatus) bool {
		return st.Role == "master" && st.Listeners["ha"] != ""
	})
	t.Logf("phase 1: promoted the slave at committed %d: %s", sEnd, strings.TrimSpace(out))
	if promoted.Epoch <= before.Epoch {
		t.Errorf("phase 1: the promoted node's epoch is %d, not above the old master's %d", promoted.Epoch, before.Epoch)
	}
	if promoted.committed() != sEnd {
		t.Errorf("phase 1: promotion changed the committed offset from %d to %d", sEnd, promoted.committed())
	}

	got := newReceived()
	startConsumer(t, consumerConfig{namesrv: s.Namesrv, group: "G_Failover", instance: "failover-consumer", topic: topic}, got.handler)
	if err := waitFor(40*time.Second, func() bool { return got.hasAll(acked) }); err != nil {
		miss := got.missing(acked)
		t.Errorf("phase 1: ACKNOWLEDGED MESSAGES LOST: %d of the %d messages acknowledged by the sync master are not delivered by the promoted slave within 40s: %s",
			len(miss), len(acked), abbrev(miss))
	} else {
		t.Logf("phase 1: all %d acknowledged messages delivered by the promoted slave (%v after the kill)", len(acked), time.Since(killedAt).Round(time.Millisecond))
	}
	if u := got.unexpected(attempted); len(u) > 0 {
		t.Errorf("phase 1: the promoted slave delivered bodies never sent: %s", abbrev(u))
	}

	// Phase 2: the old master's log as the kill left it.
	oldLog := inspectStore(t, dm)
	var tail []string
	for _, r := range oldLog.recs {
		if r.PhysOffset >= sEnd {
			tail = append(tail, string(r.Body))
		}
	}
	t.Logf("phase 2: the killed master's log ends at %d (%d records); the promoted slave's at %d: divergent tail of %d records (%d bytes)",
		oldLog.rep.End, len(oldLog.recs), sEnd, len(tail), oldLog.rep.End-sEnd)
	if len(tail) == 0 {
		t.Logf("phase 2: no divergent tail this run: the rejoin below has nothing to cut")
	}

	// The new master takes writes at the offsets the old master's tail
	// occupies: SLAVE_NOT_AVAILABLE (no replica) but stored.
	ps := newProducer(t, s.Namesrv, "failover-ps")
	var lonely []string
	for i := 0; i < 5; i++ {
		body := fmt.Sprintf("lonely-%d", i)
		res, err := sendOne(ps, topic, body, 20*time.Second)
		if err != nil {
			t.Fatalf("phase 2: send %s to the promoted node (no replica): %v (status %v)", body, err, s.mustStatus())
		}
		if res.Status != primitive.SendSlaveNotAvailable {
			t.Errorf("phase 2: send %s to the promoted sync master with no replica: %s, want SLAVE_NOT_AVAILABLE", body, statusName(res.Status))
		}
		lonely = append(lonely, body)
	}

	// The old master rejoins as a slave of the promoted node.
	r := startSlave(t, "sync-slave.toml", dm, "failover-m-rejoined", promoted.Listeners["ha"])
	s.waitWritable(1)
	rejoined := sendN(t, ps, topic, "rejoined", "", 0, 20)
	end := waitSameCommitted(t, s, r, sEnd, 20*time.Second)
	rst := r.mustStatus()
	if rst.Role != "slave" {
		t.Errorf("phase 2: the rejoined old master reports role %q", rst.Role)
	}
	if len(tail) > 0 {
		if len(r.runLines("divergent tail")) == 0 {
			t.Errorf("phase 2: the rejoined old master had a divergent tail of %d records but logged no cut (\"divergent tail\")", len(tail))
		}
		if n, err := r.metric("keel_replication_truncations_total"); err != nil || n < 1 {
			t.Errorf("phase 2: the rejoined old master had a divergent tail of %d records but keel_replication_truncations_total = %v (%v)",
				len(tail), n, err)
		}
	}
	t.Logf("phase 2: both nodes at committed %d (%v after the kill); rejoined node: %s", end, time.Since(killedAt).Round(time.Millisecond),
		strings.Join(r.runLines("divergent tail"), "\n"))
	s.stop()
	r.stop()

	newLog, oldNow := inspectStore(t, ds), inspectStore(t, dm)
	if !compareLogs(t, "promoted node", newLog, "rejoined old master", oldNow) {
		t.Errorf("phase 2: the logs of the promoted node and the rejoined old master differ")
	}
	if fmt.Sprint(newLog.rep.Epochs) != fmt.Sprint(oldNow.rep.Epochs) {
		t.Errorf("phase 2: epoch histories differ: promoted node %v, rejoined old master %v", newLog.rep.Epochs, oldNow.rep.Epochs)
	}
	nb, ob := newLog.bodies(), oldNow.bodies()
	var cutMissing []string
	for _, b := range tail {
		if ob[b] > 0 && nb[b] == 0 {
			cutMissing = append(cutMissing, b)
		}
	}
	if len(cutMissing) > 0 {
		t.Errorf("phase 2: the rejoined old master still holds %d records of its divergent tail: %s", len(cutMissing), abbrev(cutMissing))
	}
	for name, want := range map[string][]string{"acknowledged before the kill": acked, "written to the promoted node alone": lonely, "written after the rejoin": rejoined} {
		var missNew, missOld []string
		for _, b := range want {
			if nb[b] == 0 {
				missNew = append(missNew, b)
			}
			if ob[b] == 0 {
				missOld = append(missOld, b)
			}
		}
		if len(missNew) > 0 {
			t.Errorf("phase 2: messages %s missing from the promoted node's log: %s", name, abbrev(missNew))
		}
		if len(missOld) > 0 {
			t.Errorf("phase 2: messages %s missing from the rejoined old master's log: %s", name, abbrev(missOld))
		}
	}
}

// TestReplicationWipedMasterNoConflictNoReset: a sync master and its slave
// hold 100 messages and a consumer group's committed offsets; the master
// stops, loses its data directory and restarts on the same addresses while
// the slave holds the data (the ROCKETMQ-348 incident). Until the master
// has caught up from its slave it accepts no write at an offset the slave
// holds (sends fail, or succeed only at offsets beyond the slave's end),
// and the consumer group is not reset to offset 0: a new consumer of the
// group gets the new messages, not the 100 it had consumed.
func TestReplicationWipedMasterNoConflictNoReset(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	const topic, group = "E2E_Repl_Wipe", "G_Repl_Wipe"

	m := startMaster(t, "sync-master.toml", "", "wipe-m", "replication.config.sync_meta_interval=200ms")
	mha := m.haAddr()
	s := startSlave(t, "sync-slave.toml", "", "wipe-s", mha)
	m.waitWritable(1)
	p := newProducer(t, m.Namesrv, "wipe-producer")
	first := sendN(t, p, topic, "before", "", 0, 100)

	got1 := newReceived()
	c1 := startConsumer(t, consumerConfig{namesrv: m.Namesrv, group: group, instance: "wipe-consumer-1", topic: topic}, got1.handler)
	if err := waitFor(30*time.Second, func() bool { return got1.hasAll(first) }); err != nil {
		t.Fatalf("first consumer: missing within 30s: %s", abbrev(got1.missing(first)))
	}
	if err := c1.Shutdown(); err != nil {
		t.Fatalf("first consumer Shutdown: %v", err)
	}
	sEnd := waitSameCommitted(t, m, s, 1, 10*time.Second)
	// The slave receives the group's offsets by metadata sync (every 200ms
	// here) and persists them.
	offsetsFile := filepath.Join(s.cfg.data, "config", "consumerOffset.json")
	if err := waitFor(10*time.Second, func() bool {
		b, err := os.ReadFile(offsetsFile)
		return err == nil && strings.Contains(string(b), group)
	}); err != nil {
		b, _ := os.ReadFile(offsetsFile)
		t.Fatalf("the slave's %s does not mention group %s within 10s of the consumer's shutdown (metadata sync): %s",
			offsetsFile, group, b)
	}
	sOffsets, _ := os.ReadFile(offsetsFile)

	m.stop()
	wipeDir(t, m.cfg.data)
	m.cfg.extra = append(m.cfg.extra, "server.ha_addr="+mha) // the slave dials this address
	m.restart()
	t.Logf("master restarted on a wiped data directory; the slave holds [0, %d)", sEnd)

	// Probe with sends until the master is writable again.
	var accepted []string
	var firstRefusal string
	refused, deadline := 0, time.Now().Add(30*time.Second)
	for i := 0; ; i++ {
		st, serr := m.rstatus()
		body := fmt.Sprintf("probe-%04d", i)
		res, err := sendOne(p, topic, body, 10*time.Second)
		switch {
		case err != nil:
			if refused++; firstRefusal == "" {
				firstRefusal = err.Error()
			}
		default:
			if off := physOffset(res); off < sEnd {
				t.Errorf("CONFLICTING WRITE: the wiped master stored %s at offset %d (%s, queue offset %d), inside [0, %d) which the slave holds",
					body, off, statusName(res.Status), res.QueueOffset, sEnd)
			}
			if res.Status == primitive.SendOK {
				accepted = append(accepted, body)
			} else if refused++; firstRefusal == "" {
				firstRefusal = statusName(res.Status)
			}
		}
		if serr == nil && st.Writable == "yes" && len(accepted) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the wiped master did not become writable within 30s (%d probes refused, last error %v): %v", refused, err, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := m.mustStatus()
	t.Logf("wiped master writable: %d probe sends refused first (first refusal: %s), then %d accepted; status %v",
		refused, firstRefusal, len(accepted), st)
	if st.committed() < sEnd {
		t.Errorf("the wiped master accepts writes with committed offset %d, below the slave's %d", st.committed(), sEnd)
	}
	if st.Offsets["min"] != 0 {
		t.Errorf("the wiped master's log starts at %d after catching up from its slave, want 0", st.Offsets["min"])
	}
	if n, err := m.metric("keel_replication_catchup_bytes_total"); err != nil || n < float64(sEnd) {
		t.Errorf("keel_replication_catchup_bytes_total = %v (%v) on the wiped master; want at least the %d bytes the slave held", n, err, sEnd)
	}

	var after []string
	for i := 0; i < 50; i++ {
		body := fmt.Sprintf("after-%04d", i)
		res, err := sendOne(p, topic, body, 20*time.Second)
		if err != nil {
			t.Fatalf("send %s to the caught-up master: %v", body, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("send %s to the caught-up master: %s, want SEND_OK", body, statusName(res.Status))
		}
		if off := physOffset(res); off < sEnd {
			t.Errorf("CONFLICTING WRITE: %s stored at offset %d, inside [0, %d) which the slave held", body, off, sEnd)
		}
		after = append(after, body)
	}

	want := append(append([]string(nil), accepted...), after...)
	got2 := newReceived()
	startConsumer(t, consumerConfig{namesrv: m.Namesrv, group: group, instance: "wipe-consumer-2", topic: topic}, got2.handler)
	if err := waitFor(40*time.Second, func() bool { return got2.hasAll(want) }); err != nil {
		t.Errorf("the consumer of %s after the wipe: %d of the %d messages sent after it missing within 40s: %s",
			group, len(got2.missing(want)), len(want), abbrev(got2.missing(want)))
	}
	var again []string
	for _, b := range first {
		if got2.has(b) {
			again = append(again, b)
		}
	}
	if len(again) > 10 {
		mb, _ := os.ReadFile(filepath.Join(m.cfg.data, "config", "consumerOffset.json"))
		t.Errorf("CONSUMER RESET: after the master's disk was wiped, group %s re-received %d of the %d messages it had consumed and committed "+
			"(its offsets were not restored from the slave).\n  slave's consumerOffset.json before the wipe: %s\n  master's consumerOffset.json now: %s",
			group, len(again), len(first), sOffsets, mb)
	} else if len(again) > 0 {
		t.Logf("%d redeliveries at the commit boundary (allowed): %s", len(again), abbrev(again))
	}

	waitSameCommitted(t, m, s, sEnd, 10*time.Second)
	m.stop()
	s.stop()
	compareLogs(t, "wiped master", inspectStore(t, m.cfg.data), "slave", inspectStore(t, s.cfg.data))
}

// TestReplicationLinkCutAndRestore: with the HA link through an in-test
// proxy, sync producers get FLUSH_SLAVE_TIMEOUT while the link is paused
// (the replica is still connected but acknowledges nothing) and
// FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE while it is cut; each time the
// link comes back, sends succeed again and the slave catches up. The
// pause's three sends wait out the 1 s timeout each, so max_lag_time is
// raised above them: at its default (2 s) the paused replica leaves the
// in-sync set during the third, which then gets SLAVE_NOT_AVAILABLE at
// once, as designed (sdk/replication's catch-up tests cover that).
func TestReplicationLinkCutAndRestore(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	const topic = "E2E_Repl_Cut"

	m := startMaster(t, "sync-master.toml", "", "cut-m", "replication.config.timeout=1s", "replication.config.max_lag_time=10s")
	proxy := startProxy(t, m.haAddr(), 0)
	s := startSlave(t, "sync-slave.toml", "", "cut-s", proxy.Addr())
	m.waitWritable(1)
	p := newProducer(t, m.Namesrv, "cut-producer")
	sendN(t, p, topic, "healthy", "", 0, 20)

	failing := func(phase string, n int, allowed ...primitive.SendStatus) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for i := 0; i < n; i++ {
			body := fmt.Sprintf("%s-%d", phase, i)
			start := time.Now()
			res, err := sendOne(p, topic, body, 20*time.Second)
			if err != nil {
				t.Fatalf("%s: send %s: %v (want a sync-replication status)", phase, body, err)
			}
			ok := false
			for _, a := range allowed {
				ok = ok || res.Status == a
			}
			if !ok {
				t.Errorf("%s: send %s returned %s after %v; want one of %v", phase, body, statusName(res.Status),
					time.Since(start).Round(time.Millisecond), allowedNames(allowed))
			}
			seen[statusName(res.Status)]++
		}
		return seen
	}
	recovers := func(phase string) {
		t.Helper()
		var last string
		if err := waitFor(20*time.Second, func() bool {
			res, err := sendOne(p, topic, phase+"-probe", 10*time.Second)
			if err != nil {
				last = err.Error()
				return false
			}
			last = statusName(res.Status)
			return res.Status == primitive.SendOK
		}); err != nil {
			t.Fatalf("%s: no SEND_OK within 20s of restoring the link (last: %s); master %v", phase, last, m.mustStatus())
		}
		sendN(t, p, topic, phase, "", 0, 10)
	}

	proxy.pause()
	seen := failing("paused", 3, primitive.SendFlushSlaveTimeout)
	t.Logf("link paused: %v", seen)
	proxy.resume()
	recovers("resumed")

	proxy.cut()
	seen = failing("cut", 3, primitive.SendFlushSlaveTimeout, primitive.SendSlaveNotAvailable)
	t.Logf("link cut: %v", seen)
	if st := m.mustStatus(); st.Replication.InSync != 0 {
		t.Errorf("link cut: the master still counts %d replica(s) in sync: %v", st.Replication.InSync, st)
	}
	proxy.restore()
	recovers("restored")
	m.waitWritable(1)
	waitSameCommitted(t, m, s, 1, 10*time.Second)
}

func allowedNames(ss []primitive.SendStatus) []string {
	var out []string
	for _, s := range ss {
		out = append(out, statusName(s))
	}
	return out
}

// TestReplicationEmptySlaveFullCopy: an async master (1 MiB segments,
// opened for writes with `keel admin force-writes` since it starts empty)
// holds several segments of messages before any slave exists; an empty
// slave started afterwards copies the whole log from the master's minimum
// offset, builds the same consume queues, and after a clean stop both logs
// are identical.
func TestReplicationEmptySlaveFullCopy(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	const topic = "E2E_Repl_Copy"
	seg := []string{"store.segment_size=1MiB", "store.max_message_size=256KiB"}

	m := startMaster(t, "async-master.toml", "", "copy-m", seg...)
	if st := m.mustStatus(); !st.Replication.Fenced || st.Writable == "yes" {
		t.Errorf("a master started on an empty log should refuse writes until a replica or force-writes: %v", st)
	}
	if out, err := adminCLI(t, "force-writes", m.Admin); err != nil {
		t.Fatalf("keel admin force-writes: %v\n%s", err, out)
	}
	m.waitWritable(0)

	const n, workers = 1600, 4
	pad := strings.Repeat("x", 2000)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		p := newProducer(t, m.Namesrv, fmt.Sprintf("copy-producer-%d", w))
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				body := fmt.Sprintf("copy-%06d-%s", i, pad)
				res, err := sendOne(p, topic, body, 20*time.Second)
				if err == nil && res.Status != primitive.SendOK {
					err = fmt.Errorf("status %s", statusName(res.Status))
				}
				if err != nil {
					errs <- fmt.Errorf("send copy-%06d: %w", i, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("async master: %v", err)
	}
	mst := m.mustStatus()
	t.Logf("master holds [%d, %d) before the slave starts", mst.Offsets["min"], mst.committed())

	start := time.Now()
	s := startSlave(t, "async-slave.toml", "", "copy-s", m.haAddr(), seg...)
	end := waitSameCommitted(t, m, s, mst.committed(), 30*time.Second)
	t.Logf("empty slave copied %d bytes in %v", end, time.Since(start).Round(time.Millisecond))
	if sst := s.mustStatus(); sst.Offsets["min"] != mst.Offsets["min"] {
		t.Errorf("the slave's log starts at %d, the master's at %d", sst.Offsets["min"], mst.Offsets["min"])
	}
	m.stop()
	s.stop()
	ml, sl := inspectStore(t, m.cfg.data), inspectStore(t, s.cfg.data)
	compareLogs(t, "master", ml, "slave", sl)
	if got := len(sl.withPrefix("copy-")); got != n {
		t.Errorf("the slave holds %d of the %d messages", got, n)
	}
	if len(ml.rep.Segments) < 3 {
		t.Errorf("the master's log has %d segment(s); the test means to copy several", len(ml.rep.Segments))
	}
	if len(sl.rep.Segments) != len(ml.rep.Segments) {
		t.Errorf("the slave has %d segments, the master %d", len(sl.rep.Segments), len(ml.rep.Segments))
	}
	if fmt.Sprint(ml.rep.Queues) != fmt.Sprint(sl.rep.Queues) {
		t.Errorf("consume queues differ:\n  master: %v\n  slave:  %v", ml.rep.Queues, sl.rep.Queues)
	}
}

// profileSecret is the shared secret of the shipped replication profiles.
const profileSecret = "change-me-shared-secret"

// TestReplicationWrongSecretRefused: a slave configured with another
// secret, and a peer that sends junk (a frame header claiming a 2 GiB
// payload), are refused by a sync master holding data: the slave gets no
// byte, the master counts no replica in sync and keeps answering
// SLAVE_NOT_AVAILABLE, and counts the authentication failures. A peer that
// knows the secret but acknowledges beyond what it was sent is
// disconnected and acknowledges nothing. A slave with the right secret
// then copies the log (the refusals were the secret's and the lie's doing).
func TestReplicationWrongSecretRefused(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	const topic = "E2E_Repl_Auth"

	m := startMaster(t, "sync-master.toml", "", "auth-m")
	if out, err := adminCLI(t, "force-writes", m.Admin); err != nil {
		t.Fatalf("keel admin force-writes: %v\n%s", err, out)
	}
	m.waitWritable(0)
	p := newProducer(t, m.Namesrv, "auth-producer")
	for i := 0; i < 10; i++ {
		res, err := sendOne(p, topic, fmt.Sprintf("auth-%d", i), 20*time.Second)
		if err != nil {
			t.Fatalf("send to a sync master without replicas: %v", err)
		}
		if res.Status != primitive.SendSlaveNotAvailable {
			t.Errorf("send to a sync master without replicas: %s, want SLAVE_NOT_AVAILABLE", statusName(res.Status))
		}
	}
	mEnd := m.mustStatus().committed()
	if mEnd == 0 {
		t.Fatalf("the master's log is empty after 10 SLAVE_NOT_AVAILABLE sends (they should be stored)")
	}
	ha := m.haAddr()

	bad := startSlave(t, "sync-slave.toml", "", "auth-bad", ha, "replication.secret=not-the-shared-secret",
		"replication.config.reconnect_backoff_max=200ms")
	junk := append([]byte{0x01, 0x7f, 0xff, 0xff, 0xff}, []byte("this is not a keel HA peer")...)
	closed, reply, err := rawPeer(ha, junk, 5*time.Second)
	if err != nil {
		t.Fatalf("junk peer: %v", err)
	}
	if !closed {
		t.Errorf("the master kept a connection open 5s after it sent a junk frame header (reply %q)", reply)
	}

	if err := waitFor(10*time.Second, func() bool {
		n, err := m.metric("keel_replication_auth_failures_total")
		return err == nil && n >= 2
	}); err != nil {
		n, merr := m.metric("keel_replication_auth_failures_total")
		t.Errorf("keel_replication_auth_failures_total = %v (%v) 10s after a slave with a wrong secret started; want >= 2 attempts refused",
			n, merr)
	}
	time.Sleep(time.Second)
	if bst := bad.mustStatus(); bst.committed() != 0 {
		t.Errorf("the slave with the wrong secret holds data: committed %d: %v", bst.committed(), bst)
	} else if c, _ := bst.plugin("replication")["connected"].(bool); c {
		t.Errorf("the slave with the wrong secret reports itself connected: %v", bst)
	}
	mst := m.mustStatus()
	if mst.Replication.InSync != 0 {
		t.Errorf("the master counts %d replica(s) in sync with only a wrong-secret slave around: %v", mst.Replication.InSync, mst)
	}
	for _, r := range mst.Replication.Replicas {
		if r.InSync || r.Connected {
			t.Errorf("the master lists replica %+v with only a wrong-secret slave around", r)
		}
	}
	if res, err := sendOne(p, topic, "auth-after", 20*time.Second); err != nil || res.Status != primitive.SendSlaveNotAvailable {
		t.Errorf("send with only a wrong-secret slave around: %v %v, want SLAVE_NOT_AVAILABLE", res, err)
	}
	if lines := bad.runLines("auth"); len(lines) > 0 {
		t.Logf("wrong-secret slave: %s", lines[len(lines)-1])
	}

	// A peer that knows the secret but acknowledges 1 MiB beyond what it
	// was sent: rejected and disconnected, and its lie acknowledges no
	// producer's message.
	mEnd = m.mustStatus().committed()
	liar := startLyingReplica(t, ha, profileSecret, mEnd)
	select {
	case <-liar.caughtUp:
	case err := <-liar.closed:
		t.Fatalf("lying replica: the session ended before it caught up honestly: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("lying replica: did not receive the master's log up to %d within 10s", mEnd)
	}
	m.waitWritable(1)
	close(liar.lie)
	start := time.Now()
	res, err := sendOne(p, topic, "lied-about", 20*time.Second)
	switch {
	case err != nil:
		t.Logf("send acknowledged by a lying replica: %v", err)
	case res.Status == primitive.SendOK:
		t.Errorf("LIE ACCEPTED: a replica acknowledging 1 MiB beyond the master's log made the sync master answer SEND_OK")
	default:
		t.Logf("send acknowledged only by a lying replica: %s after %v", statusName(res.Status), time.Since(start).Round(time.Millisecond))
	}
	select {
	case err := <-liar.closed:
		t.Logf("lying replica disconnected: %v", err)
	case <-time.After(10 * time.Second):
		t.Errorf("the master kept a replica that acknowledged beyond its log connected for 10s")
	}
	if n, err := m.metric("keel_replication_rejected_acks_total"); err != nil || n < 1 {
		t.Errorf("keel_replication_rejected_acks_total = %v (%v) after a lying acknowledgement, want >= 1", n, err)
	}
	if st := m.mustStatus(); st.Replication.AckedOffset > st.committed() || st.Replication.InSync != 0 {
		t.Errorf("after the lying replica: acked offset %d (committed %d), %d in sync: %v",
			st.Replication.AckedOffset, st.committed(), st.Replication.InSync, st)
	}
	mEnd = m.mustStatus().committed()

	good := startSlave(t, "sync-slave.toml", "", "auth-good", ha)
	waitSameCommitted(t, m, good, mEnd, 15*time.Second)
	if bst := bad.mustStatus(); bst.committed() != 0 {
		t.Errorf("the slave with the wrong secret got data once a good slave joined: %v", bst)
	}
}
