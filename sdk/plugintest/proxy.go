package plugintest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is the TCP proxy the replication suite puts between each slave
// and its master, on a 127.0.0.1 port it picks, so that it can inject
// network faults the plugin cannot tell from real ones:
//
//   - setDelay: every chunk of bytes, in both directions, is forwarded d
//     after it was read (order kept), as on a slow link;
//   - partition: nothing is forwarded (bytes wait, connections stay open,
//     as when packets are dropped and TCP retransmits) until heal;
//   - reset: every connection through the proxy is closed at once;
//   - retarget: new connections go to another master address.
//
// ended counts the connections the master's side has closed or stopped
// sending on, so that a fault can wait for the master's answer to a slave.
type proxy struct {
	t      testing.TB
	ln     net.Listener
	target atomic.Pointer[string]
	delay  atomic.Int64 // time.Duration
	ended  atomic.Int64

	mu      sync.Mutex
	cond    *sync.Cond
	paused  bool
	closed  bool
	conns   map[net.Conn]struct{}
	pumps   sync.WaitGroup
	accepts sync.WaitGroup
}

// chunk is bytes read at a time.
type chunk struct {
	b  []byte
	at time.Time
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listen: %v", err)
	}
	p := &proxy{t: t, ln: ln, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.target.Store(&target)
	p.accepts.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

// addr is the address slaves connect to.
func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *proxy) partition() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

func (p *proxy) heal() {
	p.mu.Lock()
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *proxy) reset() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

func (p *proxy) retarget(addr string) { p.target.Store(&addr) }

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
	p.reset()
	p.accepts.Wait()
	p.pumps.Wait()
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *proxy) acceptLoop() {
	defer p.accepts.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", *p.target.Load(), 2*time.Second)
		if err != nil {
			in.Close() // the master is down: the slave sees a refused connection
			continue
		}
		if !p.track(in) || !p.track(out) {
			in.Close()
			out.Close()
			continue
		}
		p.pumps.Add(2)
		go p.pump(in, out, nil)
		go p.pump(out, in, &p.ended)
	}
}

// pump forwards from src to dst until either closes, then closes both
// and adds one to ended (if not nil).
func (p *proxy) pump(src, dst net.Conn, ended *atomic.Int64) {
	defer p.pumps.Done()
	if ended != nil {
		defer ended.Add(1)
	}
	defer p.untrack(src)
	defer p.untrack(dst)
	q := make(chan chunk, 256)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		if d := time.Duration(p.delay.Load()); d > 0 {
			time.Sleep(time.Until(c.at.Add(d)))
		}
		if !p.waitHealed() {
			break
		}
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	src.Close()
	for range q { // let the reader finish
	}
}

// waitHealed blocks while the proxy is partitioned; false once it closed.
func (p *proxy) waitHealed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.paused && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}
