package replication

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

const testSecret = "s3cret-for-tests"

// fastOpts are timings that keep tests quick.
func fastOpts() Options {
	return Options{
		HeartbeatInterval:   50 * time.Millisecond,
		IdleTimeout:         time.Second,
		SyncMetaInterval:    50 * time.Millisecond,
		ReconnectBackoff:    10 * time.Millisecond,
		ReconnectBackoffMax: 100 * time.Millisecond,
		HandshakeTimeout:    3 * time.Second,
		BatchSize:           64 << 10,
		Timeout:             3 * time.Second,
	}
}

// confirm lets a store opened before its host use the host as its
// ConfirmSource.
type confirm struct {
	h atomic.Pointer[storehost.Host]
}

func (c *confirm) ConfirmOffset() int64 {
	if h := c.h.Load(); h != nil {
		return h.ConfirmOffset()
	}
	return 0
}

// tnode is one store with its host and replicator.
type tnode struct {
	t       testing.TB
	name    string
	dir     string
	dataDir string
	store   *core.Store
	host    *storehost.Host
	repl    *Node
	visible bool
	clock   atomic.Int64
	// wrap, if set, wraps the host the replicator is started with.
	wrap func(sdk.Host) sdk.Host
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("REPL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newNode opens a store in dir (created if needed).
func newNode(t testing.TB, name, dir string, visibleAfterReplicated bool) *tnode {
	t.Helper()
	n := &tnode{t: t, name: name, dir: dir, dataDir: dir + "-plugin", visible: visibleAfterReplicated}
	n.clock.Store(1_700_000_000_000)
	if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.open()
	return n
}

func (n *tnode) open() {
	n.t.Helper()
	var cs *confirm
	opts := core.Options{Dir: n.dir, SegmentSize: 1 << 20, CQEntriesPerFile: 1024, MaxMessageSize: 64 << 10, Logger: testLogger(n.t),
		Now: func() int64 { return n.clock.Add(1) }, CheckpointEvery: 50 * time.Millisecond}
	if n.visible {
		cs = &confirm{}
		opts.Confirm = cs
	}
	s, err := core.Open(opts)
	if err != nil {
		n.t.Fatalf("%s: open store: %v", n.name, err)
	}
	n.store = s
	n.host = storehost.New(s, testLogger(n.t))
	if cs != nil {
		cs.h.Store(n.host)
	}
	n.t.Cleanup(func() { n.close() })
}

// start configures and starts a replicator on the node.
func (n *tnode) start(role, peer string, o Options) *Node {
	n.t.Helper()
	r := NewNode()
	cfg := sdk.Config{Name: n.name, Section: "replication", Role: role, Addr: "127.0.0.1:0", PeerAddr: peer,
		Secret: testSecret, DataDir: n.dataDir}
	if o.NodeID == "" {
		o.NodeID = n.name
	}
	if err := r.Setup(cfg, o); err != nil {
		n.t.Fatalf("%s: setup: %v", n.name, err)
	}
	r.log = testLogger(n.t).With("node", n.name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var h sdk.Host = n.host
	if n.wrap != nil {
		h = n.wrap(h)
	}
	if err := r.Start(ctx, h); err != nil {
		n.t.Fatalf("%s: start: %v", n.name, err)
	}
	n.repl = r
	return r
}

func (n *tnode) stopRepl() {
	if n.repl != nil {
		n.repl.Stop(context.Background())
		n.repl = nil
	}
}

func (n *tnode) close() {
	n.stopRepl()
	if n.store != nil {
		n.store.Close()
		n.store = nil
	}
}

var testAddr = netip.MustParseAddrPort("127.0.0.1:10911")

func msg(topic string, qid int32, body string) *record.Message {
	return &record.Message{Topic: topic, QueueID: qid, Body: []byte(body),
		Properties: record.EncodeProperties(map[string]string{"TAGS": "t", "KEYS": body[:min(len(body), 12)]}),
		BornHost:   testAddr, StoreHost: testAddr, BornTimestamp: 1}
}

// appendN appends n messages of about size bytes over 4 queues and returns
// the end offset of the last one.
func (n *tnode) appendN(count, size int, tag string) int64 {
	n.t.Helper()
	var end int64
	body := strings.Repeat("x", max(0, size-24))
	for i := 0; i < count; i++ {
		r, err := n.store.Append(msg("TopicA", int32(i%4), fmt.Sprintf("%s-%06d-%s", tag, i, body)))
		if err != nil {
			n.t.Fatalf("%s: append: %v", n.name, err)
		}
		end = r.End()
	}
	return end
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logBytes reads the whole log [min, committed).
func logBytes(t testing.TB, s *core.Store) (int64, []byte) {
	t.Helper()
	p := s.Positions()
	var out []byte
	for off := p.Min; off < p.Committed; {
		b, err := s.ReadLog(off, 1<<20)
		if err != nil {
			t.Fatalf("read log at %d: %v", off, err)
		}
		out = append(out, b...)
		off += int64(len(b))
	}
	return p.Min, out
}

// sameLog checks two stores hold identical bytes at identical offsets.
func sameLog(t testing.TB, a, b *core.Store) {
	t.Helper()
	amin, ab := logBytes(t, a)
	bmin, bb := logBytes(t, b)
	if amin != bmin || !bytes.Equal(ab, bb) {
		t.Fatalf("logs differ: [%d,+%d) vs [%d,+%d)", amin, len(ab), bmin, len(bb))
	}
}

// sameQueues checks every consume queue reads the same on both stores.
func sameQueues(t testing.TB, a, b *core.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []*core.Store{a, b} {
		for s.Positions().Dispatched < s.Positions().Confirm {
			if _, err := s.WaitDispatched(ctx, s.Positions().Dispatched); err != nil {
				t.Fatalf("wait dispatched: %v", err)
			}
		}
	}
	type q struct {
		topic    string
		qid      int32
		min, max int64
	}
	list := func(s *core.Store) []q {
		var out []q
		s.Queues(func(topic string, qid int32, lo, hi int64) bool {
			out = append(out, q{topic, qid, lo, hi})
			return true
		})
		slices.SortFunc(out, func(x, y q) int {
			return strings.Compare(fmt.Sprintf("%s/%05d", x.topic, x.qid), fmt.Sprintf("%s/%05d", y.topic, y.qid))
		})
		return out
	}
	qa, qb := list(a), list(b)
	if len(qa) == 0 || !slices.Equal(qa, qb) {
		t.Fatalf("queues differ:\n%v\n%v", qa, qb)
	}
	for _, x := range qa {
		for off := x.min; off < x.max; {
			ra, err := a.GetMessages(x.topic, x.qid, off, 64, 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := b.GetMessages(x.topic, x.qid, off, 64, 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ra.Status != rb.Status || ra.NextOffset != rb.NextOffset || !bytes.Equal(ra.Data, rb.Data) || !slices.Equal(queueOffsets(t, ra), queueOffsets(t, rb)) {
				t.Fatalf("%s/%d@%d: master %v next %d (%d bytes), slave %v next %d (%d bytes)", x.topic, x.qid, off,
					ra.Status, ra.NextOffset, len(ra.Data), rb.Status, rb.NextOffset, len(rb.Data))
			}
			if ra.NextOffset <= off {
				break
			}
			off = ra.NextOffset
		}
	}
}

// queueOffsets returns the queue offsets of the records res holds, each
// decoded from its own record.
func queueOffsets(t testing.TB, res core.GetResult) []int64 {
	t.Helper()
	var out []int64
	b := res.Data
	for i, size := range res.Sizes {
		r, err := record.Decode(b[:size])
		if err != nil {
			t.Fatalf("record %d of a GetMessages result: %v", i, err)
		}
		out = append(out, r.QueueOffset)
		b = b[size:]
	}
	return out
}

// proxy forwards TCP connections to target; it can pause (hold the
// connections but forward nothing: a black hole) and cut (close them and
// refuse new ones) the link, and restore it.
type proxy struct {
	t      testing.TB
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	paused bool
	cut    bool
	resume *sync.Cond
	wg     sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target}
	p.resume = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused && !p.cut {
				p.resume.Wait()
			}
			dead := p.cut
			p.mu.Unlock()
			if dead {
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

// pause stops forwarding without closing anything.
func (p *proxy) pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// cutLink closes every connection and refuses new ones.
func (p *proxy) cutLink() {
	p.mu.Lock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.resume.Broadcast()
	p.mu.Unlock()
}

// restore forwards again and accepts new connections.
func (p *proxy) restore() {
	p.mu.Lock()
	p.paused, p.cut = false, false
	p.resume.Broadcast()
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.ln.Close()
	p.cutLink()
	p.wg.Wait()
}

// tempDirs returns n store directories under one temp dir.
func tempDirs(t testing.TB, names ...string) []string {
	root := t.TempDir()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(root, n)
	}
	return out
}
