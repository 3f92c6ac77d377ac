package failover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/bench/wire"
	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/host/remoting"
)

// The group's names (the profile's server.cluster and server.broker_name).
const (
	clusterName = "BenchCluster"
	groupName   = "bench-a"
	topic       = "FailoverTopic"
)

// KeelSpec describes one keel failover run.
type KeelSpec struct {
	// Dir holds the three nodes' stores; removed afterwards. Required.
	Dir string
	// Replication is matrix.FailoverAsync or matrix.FailoverSync.
	Replication string
	// Crash is matrix.FailoverKill9 (default) or matrix.FailoverPause.
	Crash string
	// Producers send one message at a time each. Required, >= 1.
	Producers int
	// BodyBytes is the message body size. Required, >= 1.
	BodyBytes int
	// Queues of the topic; producer p sends to queue p mod Queues.
	// Required, >= 1.
	Queues int
	// Before is the load before the kill; After the load once the new
	// master answered SEND_OK and the consumer resumed (or MaxWait
	// passed). Both > 0.
	Before, After time.Duration
	// MaxWait bounds the wait, from the kill, for the first SEND_OK from
	// the new master and the consumer's first message born after the
	// kill. > 0.
	MaxWait time.Duration
	// HeartbeatTimeout is controller.heartbeat_timeout; 0 keeps keel's
	// default.
	HeartbeatTimeout time.Duration
}

func (s KeelSpec) check() error {
	if s.Dir == "" {
		return errors.New("failover: KeelSpec.Dir is required")
	}
	if s.Replication != matrix.FailoverAsync && s.Replication != matrix.FailoverSync {
		return fmt.Errorf("failover: replication %q: want %q or %q", s.Replication, matrix.FailoverAsync, matrix.FailoverSync)
	}
	if s.Crash != "" && s.Crash != matrix.FailoverKill9 && s.Crash != matrix.FailoverPause {
		return fmt.Errorf("failover: crash %q: want %q or %q", s.Crash, matrix.FailoverKill9, matrix.FailoverPause)
	}
	if s.Producers < 1 || s.BodyBytes < 1 || s.Queues < 1 {
		return fmt.Errorf("failover: need Producers, BodyBytes and Queues >= 1 (got %d, %d, %d)", s.Producers, s.BodyBytes, s.Queues)
	}
	if s.Before <= 0 || s.After <= 0 || s.MaxWait <= 0 {
		return fmt.Errorf("failover: need Before, After and MaxWait > 0 (got %v, %v, %v)", s.Before, s.After, s.MaxWait)
	}
	if s.HeartbeatTimeout < 0 {
		return fmt.Errorf("failover: HeartbeatTimeout %v is negative", s.HeartbeatTimeout)
	}
	return nil
}

// Result is one failover run. The times are from the kill, in
// milliseconds, -1 when it did not happen within MaxWait.
type Result struct {
	// FirstStoredMs: the first response from the new master (or, for
	// NATS, the first publish ack) that stored a message.
	FirstStoredMs float64
	// FirstOKMs: the first SEND_OK from the new master (NATS: the first
	// publish ack, the same as FirstStoredMs).
	FirstOKMs float64
	// ConsumerResumeMs: the first message born after the kill that the
	// consumer received; -1 also when the run has no consumer.
	ConsumerResumeMs float64
	// Acked counts acknowledged messages (SEND_OK; NATS: publish acks)
	// over the whole run; AckedLost those of them missing afterwards.
	Acked, AckedLost int64
	// Errors counts failed attempts (transport errors, error responses,
	// and for keel SLAVE_NOT_AVAILABLE and the other stored-but-not-OK
	// statuses, which are not acknowledgements).
	Errors int64
	// FirstError describes the first failed attempt after the kill.
	FirstError string
	// OldMasterResumed: keel's first SEND_OK after the kill came from the
	// old master, restarted, because the controller had not elected
	// another meanwhile (it kept it master).
	OldMasterResumed bool
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// cluster is the run's three processes.
type cluster struct {
	ctl, a, b    *proc
	aSets, bSets []string
	nsrv, ctlAdr string
	aAddr, bAddr string
	mu           sync.Mutex
	extra        []*proc // the old master, restarted
}

func (c *cluster) close() {
	c.mu.Lock()
	ps := append([]*proc{c.a, c.b}, c.extra...)
	c.mu.Unlock()
	for _, p := range ps {
		if p != nil {
			p.stop()
		}
	}
	if c.ctl != nil {
		c.ctl.stop()
	}
}

func startCluster(ctx context.Context, s KeelSpec) (*cluster, error) {
	ad, err := freeAddrs(7)
	if err != nil {
		return nil, err
	}
	c := &cluster{nsrv: ad[0], ctlAdr: ad[1], aAddr: ad[3], bAddr: ad[5]}
	ctlSets := []string{`server.roles=["namesrv","controller"]`, "server.namesrv_addr=" + ad[0], "controller.addr=" + ad[1],
		"controller.raft_addr=" + ad[2], "admin.addr=127.0.0.1:0", fmt.Sprintf("store.dir=%q", filepath.Join(s.Dir, "controller"))}
	if s.HeartbeatTimeout > 0 {
		ctlSets = append(ctlSets, fmt.Sprintf("controller.heartbeat_timeout=%q", s.HeartbeatTimeout.String()))
	}
	broker := func(name, addr, ha string) []string {
		return []string{`server.roles=["broker"]`, `server.namesrv_addrs=["` + ad[0] + `"]`, `controller.addrs=["` + ad[1] + `"]`,
			"server.cluster=" + clusterName, "server.broker_name=" + groupName, "server.broker_addr=" + addr, "server.ha_addr=" + ha,
			"admin.addr=127.0.0.1:0", fmt.Sprintf("store.dir=%q", filepath.Join(s.Dir, name)), "replication.plugin=" + s.Replication,
			"store.auto_create_topics=true", fmt.Sprintf("store.default_queues=%d", s.Queues),
			// benchmark stores share a scratch disk: nothing is refused below 99 % use (as bench/wire)
			"store.disk_max_used_ratio=0.99", "store.disk_clean_forcibly_ratio=0.99", "store.disk_warning_ratio=0.99"}
	}
	c.aSets, c.bSets = broker("broker-1", ad[3], ad[4]), broker("broker-2", ad[5], ad[6])
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if c.ctl, err = startProc(sctx, "controller", childSpec{Sets: ctlSets}); err != nil {
		return nil, err
	}
	if c.a, err = startProc(sctx, "broker 1", childSpec{Sets: c.aSets}); err != nil {
		c.close()
		return nil, err
	}
	if c.b, err = startProc(sctx, "broker 2", childSpec{Sets: c.bSets}); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// waitInSync waits until the group's master is the broker at master and
// its SyncStateSet has both brokers.
func (c *cluster) waitInSync(ctx context.Context, master string) error {
	cl, err := controller.NewClient([]string{c.ctlAdr}, 2*time.Second)
	if err != nil {
		return err
	}
	defer cl.Close()
	var g controller.Group
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g, err = cl.GetReplicaInfo(ctx, controller.GroupKey{Cluster: clusterName, BrokerName: groupName})
		if err != nil {
			continue
		}
		if m, ok := g.Master(); ok && m.Addr == master && len(g.SyncStateSet) == 2 {
			return nil
		}
	}
	return fmt.Errorf("failover: the group did not reach master %s with 2 in sync within a minute (last: %+v, %v)", master, g, err)
}

// prime sends one message to the master until SEND_OK (the topic is
// created) and waits until the name server routes it to the master and
// lists the slave.
func (c *cluster) prime(ctx context.Context, s KeelSpec) error {
	deadline := time.Now().Add(time.Minute)
	var last error
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rc, err := dialRemoting(ctx, c.aAddr)
		if err != nil {
			last = err
			continue
		}
		resp, err := rc.call(sendCommand(topic, 0, 0, []byte("prime")), 5*time.Second)
		rc.close()
		if err != nil {
			last = err
			continue
		}
		if resp.Code != remoting.Success {
			last = fmt.Errorf("priming send: code %d: %s", resp.Code, resp.Remark)
			continue
		}
		r, err := lookupRoute(ctx, c.nsrv, topic)
		if err == nil && r.master == c.aAddr && r.slave == c.bAddr {
			return nil
		}
		last = fmt.Errorf("route %+v (%v), want master %s and slave %s", r, err, c.aAddr, c.bAddr)
	}
	return fmt.Errorf("failover: priming: %w", last)
}

// RunKeel runs one keel failover measurement (see the package doc).
func RunKeel(ctx context.Context, s KeelSpec) (*Result, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("failover: create dir: %w", err)
	}
	defer os.RemoveAll(s.Dir)
	c, err := startCluster(ctx, s)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if err := c.waitInSync(ctx, c.aAddr); err != nil {
		return nil, fmt.Errorf("%w\nbroker 1: %s\nbroker 2: %s", err, c.a.log(), c.b.log())
	}
	if err := c.prime(ctx, s); err != nil {
		return nil, err
	}
	rt := &router{nsrv: c.nsrv, topic: topic}
	rt.refresh(ctx)
	ld := newLoad(s, rt, c.aAddr)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	ld.start(lctx, &wg)

	if !sleep(ctx, s.Before) {
		return nil, ctx.Err()
	}
	ld.kill.Store(time.Now().UnixNano())
	if s.Crash == matrix.FailoverPause {
		c.a.pause()
	} else {
		c.a.kill()
	}
	ld.dead.Store(time.Now().UnixNano())
	// The old master comes back on its store, as a slave, once the name
	// server routes to the new master (a paused one is killed first).
	// Not at once: the controller counts a master whose connection closed
	// dead only after ClosedMasterDead (2.5 s of the default 3 s), and
	// keeps one that registers again before, so an immediate restart
	// would measure the restart, not a failover.
	restarted := make(chan error, 1)
	go func() {
		for {
			if r, err := lookupRoute(lctx, c.nsrv, topic); err == nil && r.master == c.bAddr {
				break
			}
			if !sleep(lctx, 20*time.Millisecond) {
				restarted <- nil // no new master before the end: nothing to restart
				return
			}
		}
		if s.Crash == matrix.FailoverPause {
			c.a.kill()
		}
		// Its start is bounded by ctx, not by the load: recovering its
		// store (the hash index replays after a crash) may outlast
		// After on a slow machine, and a restart cut short is no result.
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		p, err := startProc(sctx, "broker 1 (restarted)", childSpec{Sets: c.aSets})
		if err == nil {
			c.mu.Lock()
			c.extra = append(c.extra, p)
			c.mu.Unlock()
		}
		restarted <- err
	}()
	awaitRecovery(ctx, time.Unix(0, ld.kill.Load()).Add(s.MaxWait), ld.firstOK, ld.resumedCh)
	sleep(ctx, s.After)
	stopLoad()
	wg.Wait()
	if err := <-restarted; err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("failover: restart the old master: %w", err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := ld.result()
	// The group's master now: the other broker, or the old one if the
	// controller kept it.
	master := c.bAddr
	if r, err := lookupRoute(ctx, c.nsrv, topic); err == nil && r.master != "" {
		master = r.master
	}
	lost, err := countLost(ctx, master, s.Queues, ld.ackedIDs())
	if err != nil {
		return nil, fmt.Errorf("failover: check acknowledged messages on the new master: %w", err)
	}
	res.AckedLost = lost
	return res, nil
}

// awaitRecovery waits until both channels are closed (the first ack
// from the new leader, the consumer's first message born after the
// kill), deadline passes or ctx ends.
func awaitRecovery(ctx context.Context, deadline time.Time, acked, resumed <-chan struct{}) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for _, ch := range []<-chan struct{}{acked, resumed} {
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// countLost pulls every queue of the topic from the broker at addr from
// offset 0 to its end and counts the ids in acked it does not hold.
func countLost(ctx context.Context, addr string, queues int, acked []uint64) (int64, error) {
	c, err := dialRemoting(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.close()
	have := make(map[uint64]bool, len(acked))
	for q := 0; q < queues; q++ {
		var off int64
		for {
			msgs, next, err := pull(c, topic, q, off, 256)
			if errors.Is(err, errNoMessages) {
				break
			}
			if err != nil {
				return 0, err
			}
			if next <= off && len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				if m.ok {
					have[m.id] = true
				}
			}
			off = next
		}
	}
	var lost int64
	for _, id := range acked {
		if !have[id] {
			lost++
		}
	}
	return lost, nil
}

// load is the run's producers and consumer.
type load struct {
	s       KeelSpec
	rt      *router
	oldAddr string
	body    []byte
	// kill is the UnixNano of the kill signal, dead of the moment the
	// old master was seen gone (reaped, or stopped); 0 before. Times are
	// from kill; only requests sent, and messages born, after dead show
	// the new master.
	kill, dead atomic.Int64
	firstOK    chan struct{}
	okOnce     sync.Once
	// resumedCh is closed when the consumer first got a message born
	// after the kill.
	resumedCh  chan struct{}
	resumeOnce sync.Once

	firstStored, firstOKAt, resumed atomic.Int64 // ns after the kill, 0 not yet
	oldResumed                      atomic.Bool  // the first SEND_OK came from the old master
	errors                          atomic.Int64

	mu       sync.Mutex
	acked    [][]uint64
	firstErr string
}

func newLoad(s KeelSpec, rt *router, oldAddr string) *load {
	return &load{s: s, rt: rt, oldAddr: oldAddr, body: wire.Body(0, s.BodyBytes), firstOK: make(chan struct{}),
		resumedCh: make(chan struct{}), acked: make([][]uint64, s.Producers)}
}

func (l *load) start(ctx context.Context, wg *sync.WaitGroup) {
	for p := 0; p < l.s.Producers; p++ {
		wg.Add(1)
		go func() { defer wg.Done(); l.produce(ctx, p) }()
	}
	for q := 0; q < l.s.Queues; q++ {
		wg.Add(1)
		go func() { defer wg.Done(); l.consume(ctx, q) }()
	}
}

// since returns ns since the kill, or 0 before it.
func (l *load) since(now time.Time) int64 {
	k := l.kill.Load()
	if k == 0 || now.UnixNano() <= k {
		return 0
	}
	return now.UnixNano() - k
}

func (l *load) fail(now time.Time, err string) {
	l.errors.Add(1)
	if l.since(now) > 0 {
		l.mu.Lock()
		if l.firstErr == "" {
			l.firstErr = err
		}
		l.mu.Unlock()
	}
}

func (l *load) produce(ctx context.Context, p int) {
	var c *rconn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	var seq uint64
	for ctx.Err() == nil {
		if c == nil {
			addr := l.rt.get().master
			if addr == "" {
				addr = l.rt.refresh(ctx).master
			}
			if addr == "" {
				sleep(ctx, 10*time.Millisecond)
				continue
			}
			var err error
			if c, err = dialRemoting(ctx, addr); err != nil {
				l.fail(time.Now(), err.Error())
				l.rt.refresh(ctx)
				sleep(ctx, 10*time.Millisecond)
				continue
			}
		}
		seq++
		id := wire.MessageID(p, seq)
		sent := time.Now()
		resp, err := c.call(sendCommand(topic, p%l.s.Queues, id, l.body), clientTimeout)
		now := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.fail(now, err.Error())
			c.close()
			c = nil
			l.rt.refresh(ctx)
			continue
		}
		st := wire.StatusOf(resp.Code)
		// Only a request sent once the old master was gone shows the
		// group serving again: from the other broker, or from the old
		// master restarted, should the controller have kept it master.
		d := l.dead.Load()
		after := d != 0 && sent.UnixNano() > d
		if after && wire.Stored(st) {
			l.firstStored.CompareAndSwap(0, l.since(now))
		}
		if st == wire.StatusOK {
			l.mu.Lock()
			l.acked[p] = append(l.acked[p], id)
			l.mu.Unlock()
			if after && l.firstOKAt.CompareAndSwap(0, l.since(now)) {
				l.oldResumed.Store(c.addr == l.oldAddr)
				l.okOnce.Do(func() { close(l.firstOK) })
			}
			continue
		}
		l.fail(now, fmt.Sprintf("%s from %s: code %d: %s", st, c.addr, resp.Code, resp.Remark))
		if !wire.Stored(st) {
			// An error response (a slave, a refusing master): follow the route.
			c.close()
			c = nil
			l.rt.refresh(ctx)
		} else {
			sleep(ctx, 5*time.Millisecond)
		}
	}
}

// consume pulls queue q from the route's master, or its slave while it
// lists none, and notes the first message born after the kill.
func (l *load) consume(ctx context.Context, q int) {
	var c *rconn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	var off int64
	for ctx.Err() == nil {
		r := l.rt.get()
		addr := r.master
		if addr == "" {
			addr = r.slave
		}
		if c != nil && c.addr != addr {
			c.close()
			c = nil
		}
		if c == nil {
			var err error
			if addr == "" {
				l.rt.refresh(ctx)
				sleep(ctx, 10*time.Millisecond)
				continue
			}
			if c, err = dialRemoting(ctx, addr); err != nil {
				l.rt.refresh(ctx)
				sleep(ctx, 10*time.Millisecond)
				continue
			}
		}
		msgs, next, err := pull(c, topic, q, off, 64)
		switch {
		case errors.Is(err, errNoMessages):
			off = next
			sleep(ctx, 2*time.Millisecond)
			continue
		case err != nil:
			c.close()
			c = nil
			l.rt.refresh(ctx)
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		off = next
		now := time.Now()
		if k := l.dead.Load(); k != 0 {
			for _, m := range msgs {
				if m.born*int64(time.Millisecond) > k {
					l.resumed.CompareAndSwap(0, l.since(now))
					l.resumeOnce.Do(func() { close(l.resumedCh) })
					break
				}
			}
		}
	}
}

func (l *load) ackedIDs() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uint64
	for _, a := range l.acked {
		out = append(out, a...)
	}
	slices.Sort(out)
	return out
}

func (l *load) result() *Result {
	at := func(v int64) float64 {
		if v == 0 {
			return -1
		}
		return ms(time.Duration(v))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &Result{FirstStoredMs: at(l.firstStored.Load()), FirstOKMs: at(l.firstOKAt.Load()), ConsumerResumeMs: at(l.resumed.Load()),
		Errors: l.errors.Load(), FirstError: l.firstErr, OldMasterResumed: l.oldResumed.Load()}
	for _, a := range l.acked {
		r.Acked += int64(len(a))
	}
	return r
}
