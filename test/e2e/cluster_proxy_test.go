package e2e

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// ctlProxy is an in-test TCP proxy between a broker and one controller's
// remoting address that the test can cut (every connection closed, new
// ones refused), silence (connections stay open, nothing flows: a network
// that drops packets) and heal (every connection closed, as TCP would give
// up on a long partition, and new ones served). haProxy is not enough here: a controller
// that does not lead answers CONTROLLER_NOT_LEADER with the leader's own
// address (the controllerLeaderAddress header, also in the metadata
// answer), and the broker's client follows it, around any proxy. So this
// proxy reads the controller's answers frame by frame and rewrites that
// header from a controller's address to its proxy's (rewrite), so every
// connection the broker makes to a controller goes through a proxy.
type ctlProxy struct {
	t        *testing.T
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	cond    *sync.Cond
	mode    int               // proxyUp, proxyPaused (silent), proxyCut
	rewrite map[string]string // controller remoting address -> its proxy
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// controllerLeaderAddressHeader is the header the controller names its
// leader in (RocketMQ's controllerLeaderAddress).
const controllerLeaderAddressHeader = "controllerLeaderAddress"

// startCtlProxies starts one proxy per controller address, each rewriting
// every controller address to its proxy, and returns them in order.
func startCtlProxies(t *testing.T, upstreams []string) []*ctlProxy {
	t.Helper()
	rewrite := map[string]string{}
	var ps []*ctlProxy
	for _, u := range upstreams {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("controller proxy listen: %v", err)
		}
		p := &ctlProxy{t: t, ln: ln, upstream: u, rewrite: rewrite, conns: map[net.Conn]struct{}{}}
		p.cond = sync.NewCond(&p.mu)
		rewrite[u] = p.Addr()
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.wg.Add(1)
		go p.accept()
		t.Cleanup(p.close)
	}
	return ps
}

// Addr is the address the broker should dial instead of the controller.
func (p *ctlProxy) Addr() string { return p.ln.Addr().String() }

func (p *ctlProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		if mode != proxyUp {
			c.Close()
			continue
		}
		u, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.mode != proxyUp {
			p.mu.Unlock()
			c.Close()
			u.Close()
			continue
		}
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // broker -> controller: as is
			defer p.wg.Done()
			defer c.Close()
			defer u.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 && (!p.waitUp() || writeAll(u, buf[:n]) != nil) {
					return
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // controller -> broker: frame by frame, rewritten
			defer p.wg.Done()
			defer c.Close()
			defer u.Close()
			br := bufio.NewReader(u)
			for {
				cmd, err := remoting.ReadCommand(br, 64<<20)
				if err != nil {
					return
				}
				if a := cmd.Ext(controllerLeaderAddressHeader); a != "" {
					if to, ok := p.rewrite[a]; ok {
						cmd.SetExt(controllerLeaderAddressHeader, to)
					}
				}
				if !p.waitUp() || writeAll(c, cmd.AppendFrame(nil)) != nil {
					return
				}
			}
		}()
	}
}

func writeAll(c net.Conn, b []byte) error {
	_, err := c.Write(b)
	return err
}

// waitUp blocks while the proxy is silent; false means cut.
func (p *ctlProxy) waitUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mode == proxyPaused {
		p.cond.Wait()
	}
	return p.mode == proxyUp
}

// setMode switches the proxy to mode (proxyUp, proxyPaused: silent,
// proxyCut). Cutting, and leaving silence, close every connection.
func (p *ctlProxy) setMode(mode int) {
	p.mu.Lock()
	var toClose []net.Conn
	if mode == proxyCut || p.mode == proxyPaused {
		for c := range p.conns {
			toClose = append(toClose, c)
		}
		p.conns = map[net.Conn]struct{}{}
	}
	p.mode = mode
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, c := range toClose {
		c.Close()
	}
}

func (p *ctlProxy) close() {
	p.ln.Close()
	p.setMode(proxyCut)
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.t.Logf("controller proxy %s: connections did not close within 5s", p.Addr())
	}
}
