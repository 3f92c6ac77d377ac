package controller

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// Test timing: short, but long enough for -race on a loaded machine.
const (
	testHeartbeatTimeout = 1500 * time.Millisecond
	testScanInterval     = 100 * time.Millisecond
	testRaftTimeout      = 500 * time.Millisecond
	testBeatEvery        = 200 * time.Millisecond
)

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(discard{}, nil))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// freeAddr returns a 127.0.0.1 address with a port the kernel just handed
// out (raft needs every peer's address before any transport exists).
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// testNode is one controller with its remoting server.
type testNode struct {
	t    testing.TB
	cfg  Config
	ctrl *Controller
	rs   *remoting.Server
	addr string // remoting
}

func (n *testNode) start() {
	n.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	n.cfg.RemotingAddr = n.addr
	ctrl, err := New(n.cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	rs := remoting.NewServer(remoting.ServerConfig{Logger: n.cfg.Logger})
	ctrl.Register(rs)
	go rs.Serve(ln)
	if err := ctrl.Start(context.Background()); err != nil {
		rs.Close()
		n.t.Fatal(err)
	}
	n.ctrl, n.rs = ctrl, rs
}

func (n *testNode) stop() {
	if n.ctrl == nil {
		return
	}
	if err := n.ctrl.Close(); err != nil {
		n.t.Errorf("closing %s: %v", n.cfg.NodeID, err)
	}
	n.rs.Close()
	n.ctrl, n.rs = nil, nil
}

// startCluster starts n controllers bootstrapped together.
func startCluster(t *testing.T, n int) []*testNode {
	t.Helper()
	return startClusterWith(t, n, func(*Config) {})
}

// startClusterWith is startCluster with each Config changed by mod.
func startClusterWith(t *testing.T, n int, mod func(*Config)) []*testNode {
	t.Helper()
	var peers []Peer
	for i := range n {
		peers = append(peers, Peer{ID: "c" + string(rune('1'+i)), Addr: freeAddr(t)})
	}
	base := t.TempDir()
	nodes := make([]*testNode, n)
	for i, p := range peers {
		nodes[i] = &testNode{t: t, cfg: Config{
			NodeID: p.ID, RaftAddr: p.Addr, Dir: filepath.Join(base, p.ID), Peers: peers,
			HeartbeatTimeout: testHeartbeatTimeout, ScanInterval: testScanInterval, RaftTimeout: testRaftTimeout,
			ApplyTimeout: 2 * time.Second, Logger: testLogger(t).With("node", p.ID),
		}}
		mod(&nodes[i].cfg)
		nodes[i].start()
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	return nodes
}

// leaderOf waits for a ready leader among the running nodes.
func leaderOf(t testing.TB, nodes []*testNode, within time.Duration) *testNode {
	t.Helper()
	var l *testNode
	eventually(t, within, "a controller leader", func() bool {
		for _, n := range nodes {
			if n.ctrl != nil && n.ctrl.IsLeader() {
				if _, addr := n.ctrl.Leader(); addr == n.addr {
					l = n
					return true
				}
			}
		}
		return false
	})
	return l
}

func addrsOf(nodes []*testNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.addr)
	}
	return out
}

func eventually(t testing.TB, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testBroker is a simulated broker: its own client (so its connections
// are its own), a heartbeat loop that can be paused, and a position.
type testBroker struct {
	t      testing.TB
	reg    Registration
	cl     *Client
	id     int64
	epoch  atomic.Int32
	offset atomic.Int64
	paused atomic.Bool
	// told is the master id the last heartbeat answer named.
	told atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

func newTestBroker(t testing.TB, addrs []string, k GroupKey, name string, offset int64) *testBroker {
	t.Helper()
	cl, err := NewClient(addrs, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b := &testBroker{t: t, cl: cl, stop: make(chan struct{}),
		reg: Registration{Group: k, Addr: "127.0.0.1:" + name, HAAddr: "127.0.0.1:ha-" + name, NodeID: name}}
	b.offset.Store(offset)
	id, _, err := cl.Register(context.Background(), b.reg)
	if err != nil {
		t.Fatalf("registering %s: %v", name, err)
	}
	b.id = id
	t.Cleanup(b.close)
	return b
}

// heartbeat sends one heartbeat and remembers the master it was told of.
func (b *testBroker) heartbeat() error {
	g, err := b.cl.Heartbeat(context.Background(), Heartbeat{
		Group: b.reg.Group, BrokerID: b.id, Addr: b.reg.Addr,
		Epoch: b.epoch.Load(), MaxOffset: b.offset.Load(),
	})
	if err == nil {
		b.told.Store(g.MasterID)
	}
	return err
}

func (b *testBroker) beat() {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(testBeatEvery)
		defer t.Stop()
		for {
			if !b.paused.Load() {
				b.heartbeat() // errors are retried at the next tick, as a broker does
			}
			select {
			case <-b.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// close stops heartbeats and closes the broker's connections (a broker
// process that died).
func (b *testBroker) close() {
	select {
	case <-b.stop:
		return
	default:
	}
	close(b.stop)
	b.wg.Wait()
	b.cl.Close()
}

func replica(t testing.TB, cl *Client, k GroupKey) Group {
	t.Helper()
	g, err := cl.GetReplicaInfo(context.Background(), k)
	if err != nil {
		t.Fatalf("replica info of %s: %v", k, err)
	}
	return g
}

// waitMaster waits until the group's master is want and returns the group.
func waitMaster(t testing.TB, cl *Client, k GroupKey, want int64, within time.Duration) Group {
	t.Helper()
	var g Group
	eventually(t, within, "master "+k.String(), func() bool {
		var err error
		g, err = cl.GetReplicaInfo(context.Background(), k)
		return err == nil && g.MasterID == want
	})
	return g
}

func isErr(err, target error) bool { return errors.Is(err, target) }
