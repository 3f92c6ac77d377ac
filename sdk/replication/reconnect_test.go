package replication

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// leakyProxy forwards TCP connections to target. dropSlaveSide closes the
// slave's side of the connections forwarded so far and leaves their
// master side open and silent (what the master reads of them is nothing,
// what it writes is drained), as a partition the slave noticed first does:
// the slave reconnects while the master still holds its old connection.
type leakyProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   []net.Conn // slave sides
	up     []net.Conn // master sides
	wg     sync.WaitGroup
}

func newLeakyProxy(t *testing.T, target string) *leakyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &leakyProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range append(p.down, p.up...) {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *leakyProxy) addr() string { return p.ln.Addr().String() }

func (p *leakyProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		p.down, p.up = append(p.down, down), append(p.up, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // slave -> master; the master side stays open when the slave's ends
			defer p.wg.Done()
			io.Copy(up, down)
		}()
		go func() { // master -> slave; once the slave's side is gone, drain
			defer p.wg.Done()
			io.Copy(down, up)
			io.Copy(io.Discard, up)
		}()
	}
}

// connections is how many connections the proxy accepted.
func (p *leakyProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.down)
}

// dropSlaveSide closes the slave's side of every connection so far.
func (p *leakyProxy) dropSlaveSide() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.down {
		c.Close()
	}
}

// A slave that reconnects while the master still holds its old connection
// is one replica: the master drops the old connection as the new one
// starts streaming, so a policy needing two replicas never acknowledges
// with this one slave, and the state lists it once.
func TestReconnectedReplicaCountsOnce(t *testing.T) {
	dirs := tempDirs(t, "master", "slave")
	o := fastOpts()
	o.WaitReplicas = 2
	o.IdleTimeout = time.Minute // the master must not time the old connection out during the test
	m := newNode(t, "master", dirs[0], false)
	m.start(RoleMaster, "", o)
	px := newLeakyProxy(t, m.repl.Addr())
	s := newNode(t, "slave", dirs[1], false)
	s.start(RoleSlave, px.addr(), o)

	// The slave acknowledges the first batch over its first connection.
	first := m.appendN(20, 100, "before")
	eventually(t, 5*time.Second, "the replica to acknowledge the first batch", func() bool {
		st := m.host.Replication()
		return len(st.Replicas) == 1 && st.Replicas[0].AckOffset == first
	})

	// The slave's side breaks; it reconnects, and the second batch can
	// only reach it over the new connection (the old one's slave side is
	// closed), so once it acknowledges that batch the new connection is
	// streaming while the master's end of the old one is still open.
	px.dropSlaveSide()
	second := m.appendN(20, 100, "after")
	eventually(t, 10*time.Second, "the reconnected replica to acknowledge the second batch", func() bool {
		st := m.host.Replication()
		for _, r := range st.Replicas {
			if r.AckOffset == second {
				return px.connections() == 2
			}
		}
		return false
	})
	check := func(when string, want int64) {
		t.Helper()
		st := m.host.Replication()
		if len(st.Replicas) != 1 || st.Replicas[0].ID != "slave" || st.Replicas[0].AckOffset != want ||
			st.InSync != 1 || st.AckedOffset != 0 {
			t.Fatalf("%s: one slave, reconnected, counted as %d in-sync replicas, a 2-of-2 policy acknowledged %d "+
				"(the first batch ends at %d, the replica acknowledged %d); replicas listed: %+v",
				when, st.InSync, st.AckedOffset, first, want, st.Replicas)
		}
	}
	check("once the new connection streams", second)

	// The old connection's handler returns (the master closed it); its
	// cleanup must leave the new connection counted, acknowledging.
	master := m.repl.m
	eventually(t, 5*time.Second, "the master to hold only the new connection", func() bool {
		master.mu.Lock()
		defer master.mu.Unlock()
		return len(master.conns) == 1
	})
	third := m.appendN(20, 100, "later")
	eventually(t, 5*time.Second, "the replica to acknowledge the third batch", func() bool {
		st := m.host.Replication()
		return len(st.Replicas) == 1 && st.Replicas[0].AckOffset == third
	})
	check("after the old connection's cleanup", third)
}
