package replication

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/sdk"
)

// Fence keys (a master is fenced while any key is set).
const (
	fenceStart   = "start"
	fenceCatchUp = "catch-up"
)

// maxPeers bounds concurrent HA connections a master serves.
const maxPeers = 64

// master is the master role: a listener, one goroutine pair per replica,
// the in-sync set and the fence.
type master struct {
	n    *Node
	host sdk.Host
	opts Options
	ln   net.Listener
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	peers     map[replicaKey]*peer // streaming replicas, one per identity (see peer)
	conns     map[*Conn]struct{}   // every open connection, handshaking or streaming
	fences    map[string]string
	refused   map[string]string
	epochs    []sdk.Epoch // cached history (this node is its only writer)
	needEpoch bool        // fenced at start: begin an epoch when the fence lifts
	maxSeen   int32

	committed atomic.Int64
	timeline  timeline

	repMu sync.Mutex
	acked int64
	last  sdk.ReplicationState

	catchMu sync.Mutex
}

// peer is one connection of a replica.
//
// Identity. A replica is identified by its replicaKey: the id it sent in
// its hello (Options.NodeID, which defaults to its HA listen address) and
// the IP address its connection comes from. The id alone would not do:
// the default id is a listen address such as ":10912", which slaves on
// different machines share. The master counts at most one peer per key:
// m.peers maps each key to the peer streaming for it, and when a new
// connection of a key starts streaming, the newest wins: the older peer
// (a connection the replica gave up on, after a partition say, that the
// master has not yet timed out) is removed from m.peers in the same step
// that adds the new one, so no state ever counts both, and its connection
// is closed. A peer's own cleanup removes only itself (see serve).
type peer struct {
	id, addr  string
	key       replicaKey
	conn      *Conn
	received  atomic.Int64
	flushed   atomic.Int64
	sent      atomic.Int64 // end of what was streamed
	contact   atomic.Int64 // unix nanos of the last frame received
	streaming atomic.Bool
	acked     chan struct{} // capacity 1: an acknowledgement arrived (wakes stream)
}

// replicaKey is a replica's identity (see peer).
type replicaKey struct {
	id, host string
}

// keyOf is the identity of a replica that sent id in its hello over a
// connection from remote (host:port; a remote that is not host:port is
// taken whole as the host).
func keyOf(id, remote string) replicaKey {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return replicaKey{id: id, host: host}
}

func newMaster(n *Node, ln net.Listener, hist []sdk.Epoch) *master {
	ctx, cancel := context.WithCancel(context.Background())
	m := &master{n: n, host: n.host, opts: n.opts, ln: ln, ctx: ctx, cancel: cancel,
		log:   n.log.With("role", "master", "addr", ln.Addr().String()),
		peers: map[replicaKey]*peer{}, conns: map[*Conn]struct{}{}, fences: map[string]string{}, refused: map[string]string{},
		epochs: slices.Clone(hist), maxSeen: n.state.get().MaxEpoch}
	if len(hist) > 0 {
		m.maxSeen = max(m.maxSeen, hist[len(hist)-1].Epoch)
	}
	if pos, err := n.host.Positions(ctx); err == nil {
		m.committed.Store(pos.Committed)
		m.timeline.record(pos.Committed, time.Now())
	}
	return m
}

func (m *master) start() {
	m.wg.Add(2)
	go m.acceptLoop()
	go m.tickLoop()
}

// stop closes the listener and every replica connection and waits for
// the goroutines.
func (m *master) stop() {
	m.cancel()
	m.ln.Close()
	m.closePeers(nil)
	m.wg.Wait()
}

// closePeers closes every connection but except's; replicas see EOF and
// re-handshake.
func (m *master) closePeers(except *Conn) {
	m.mu.Lock()
	for c := range m.conns {
		if c != except {
			c.Close()
		}
	}
	m.mu.Unlock()
}

func (m *master) acceptLoop() {
	defer m.wg.Done()
	var handshakes sync.WaitGroup
	defer handshakes.Wait()
	conns := make(chan struct{}, maxPeers)
	for {
		nc, err := m.ln.Accept()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			m.log.Warn("HA accept failed", "err", err)
			select {
			case <-time.After(50 * time.Millisecond):
				continue
			case <-m.ctx.Done():
				return
			}
		}
		select {
		case conns <- struct{}{}:
		default:
			m.log.Warn("HA connection refused: too many replicas", "remote", nc.RemoteAddr().String(), "max", maxPeers)
			nc.Close()
			continue
		}
		handshakes.Add(1)
		go func() {
			defer handshakes.Done()
			defer func() { <-conns }()
			m.handle(nc)
		}()
	}
}

// tickLoop refreshes the committed offset, samples it for lag in seconds,
// and re-reports the in-sync set.
func (m *master) tickLoop() {
	defer m.wg.Done()
	t := time.NewTicker(min(100*time.Millisecond, m.opts.HeartbeatInterval))
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			if pos, err := m.host.Positions(m.ctx); err == nil {
				m.observe(pos.Committed)
			}
			m.report(m.ctx, false)
		}
	}
}

// observe records a committed offset the master has seen.
func (m *master) observe(c int64) {
	for {
		cur := m.committed.Load()
		if c <= cur {
			return
		}
		if m.committed.CompareAndSwap(cur, c) {
			m.timeline.record(c, time.Now())
			return
		}
	}
}
