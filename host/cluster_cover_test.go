package host

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
)

// holdProxy forwards TCP connections to upstream; while held, it keeps
// every connection open but forwards nothing (the bytes wait), so the
// far side sees a silent peer, not a closed one.
type holdProxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	held     bool
	resumed  chan struct{} // closed when a hold ends
	conns    []net.Conn
}

func startHoldProxy(t *testing.T, upstream string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, upstream: upstream, resumed: make(chan struct{})}
	close(p.resumed)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *holdProxy) addr() string { return p.ln.Addr().String() }

func (p *holdProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies src to dst, each chunk only once no hold is in force.
func (p *holdProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			wait := p.resumed
			p.mu.Unlock()
			<-wait
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *holdProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		p.held, p.resumed = true, make(chan struct{})
	}
}

func (p *holdProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held {
		p.held = false
		close(p.resumed)
	}
}

func (p *holdProxy) close() {
	p.resume()
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// appendAndAck appends one record on master m and waits for its
// acknowledgement under the policy in force; it returns the status and
// the record's end.
func appendAndAck(t *testing.T, m *Node, topic string) (storehostAckStatus, int64) {
	t.Helper()
	r, err := m.store.Append(&record.Message{Topic: topic, Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan storehostAckStatus, 1)
	m.host.Ack(m.ackPolicy(), r.End(), func(st storehostAckStatus) { got <- st })
	return <-got, r.End()
}

// replicaAt is the replica the master m reports under id (a slave's HA
// address), and whether it is connected.
func replicaAt(m *Node, id string) (inSync bool, ack int64, connected bool) {
	for _, r := range m.host.Replication().Replicas {
		if r.ID == id && r.Connected {
			return r.InSync, r.AckOffset, true
		}
	}
	return false, 0, false
}

// TestClusterFewerAcksNeedEverySyncStateSetReplica is issue #18's rule
// for min_in_sync_replicas: a master (a) with two slaves (b, c), sync
// replication, wait_replicas = 2 and min_in_sync_replicas = 1. c stops,
// the controller commits the set {a, b}: acks proceed with b. Then the
// master loses its link to the controller (a proxy holds every byte, so
// no further change of the set can commit), c comes back and catches up,
// and b stops. b is still in the committed set, so the controller could
// elect it: nothing b does not hold may be acknowledged, even though c,
// in sync, holds it. Once the link heals and the controller commits
// {a, c}, acks proceed with c.
func TestClusterFewerAcksNeedEverySyncStateSetReplica(t *testing.T) {
	ctl := startControllerNode(t)
	link := startHoldProxy(t, ctl.Addr("controller"))
	broker := func(ctlAddr, dir, ha string) []string {
		return append(clusterBrokerSets(ctl, dir, ha), `controller.addrs=["`+ctlAddr+`"]`,
			"controller.heartbeat_timeout=30s", // the lease (20 s) outlasts the held link
			"replication.plugin=sync", "replication.config.wait_replicas=2", "replication.config.min_in_sync_replicas=1",
			"replication.config.max_lag_time=300ms", "replication.config.timeout=500ms")
	}
	dirB, dirC := t.TempDir(), t.TempDir()
	haB, haC := freeAddr(t), freeAddr(t)
	a := startSyncClusterNode(t, broker(link.addr(), t.TempDir(), freeAddr(t)))
	b := startSyncClusterNode(t, broker(ctl.Addr("controller"), dirB, haB))
	c := startSyncClusterNode(t, broker(ctl.Addr("controller"), dirC, haC))
	key := a.cluster.key
	committed := func() []int64 {
		g, _ := ctl.ctl.Group(key)
		return g.SyncStateSet
	}
	idA, idB, idC := a.cluster.brokerID(), b.cluster.brokerID(), c.cluster.brokerID()
	waitUntil(t, 15*time.Second, "a writable with {a, b, c} committed", func() bool {
		return a.WriteRefusal() == "yes" && slices.Equal(committed(), sortedIDs(idA, idB, idC))
	})
	if st, _ := appendAndAck(t, a, "ClusterCover"); st.String() != "SEND_OK" {
		t.Fatalf("with both slaves in sync: %v", st)
	}

	c.Stop(context.Background())
	waitUntil(t, 10*time.Second, "the controller to commit {a, b}", func() bool { return slices.Equal(committed(), sortedIDs(idA, idB)) })
	waitUntil(t, 10*time.Second, "an ack with b alone", func() bool {
		st, _ := appendAndAck(t, a, "ClusterCover")
		return st.String() == "SEND_OK"
	})

	link.hold()
	c2 := startSyncClusterNode(t, broker(ctl.Addr("controller"), dirC, haC))
	if c2.cluster.brokerID() != idC {
		t.Fatalf("c came back as broker %d, want %d", c2.cluster.brokerID(), idC)
	}
	waitUntil(t, 10*time.Second, "c back in sync", func() bool {
		inSync, ack, ok := replicaAt(a, haC)
		return ok && inSync && ack == a.store.Positions().Committed
	})
	b.Stop(context.Background())
	heldByB := b.store.Positions().Committed
	waitUntil(t, 10*time.Second, "a to see b gone", func() bool { _, _, ok := replicaAt(a, haB); return !ok })
	for i := 0; i < 10; i++ {
		st, end := appendAndAck(t, a, "ClusterCover")
		if set := committed(); st.String() == "SEND_OK" && slices.Contains(set, idB) && end > heldByB {
			t.Fatalf("acknowledged a record b does not hold (end %d, b holds %d) while the controller's SyncStateSet %v lists b: "+
				"the controller could elect b and lose it", end, heldByB, set)
		}
		if st.String() != "SLAVE_NOT_AVAILABLE" {
			t.Fatalf("with b, in the committed set, gone: %v, want SLAVE_NOT_AVAILABLE", st)
		}
		time.Sleep(50 * time.Millisecond)
	}

	link.resume()
	waitUntil(t, 15*time.Second, "the controller to commit {a, c}", func() bool { return slices.Equal(committed(), sortedIDs(idA, idC)) })
	waitUntil(t, 10*time.Second, "an ack with c", func() bool {
		st, end := appendAndAck(t, a, "ClusterCover")
		if st.String() != "SEND_OK" {
			return false
		}
		if _, ack, _ := replicaAt(a, haC); ack < end {
			t.Fatalf("acknowledged a record c does not hold (ack %d, end %d) with {a, c} committed", ack, end)
		}
		return true
	})
}

// sortedIDs is ids in order, as a SyncStateSet lists them.
func sortedIDs(ids ...int64) []int64 {
	slices.Sort(ids)
	return ids
}
