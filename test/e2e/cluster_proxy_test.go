package e2e

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// ctlProxy is an in-test TCP proxy between a broker and one controller's
// remoting address that the test can cut (every connection closed, new
// ones refused) and restore. haProxy is not enough here: a controller
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
	cut     bool
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
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		u, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
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
			io.Copy(u, c)
			c.Close()
			u.Close()
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
				if _, err := c.Write(cmd.AppendFrame(nil)); err != nil {
					return
				}
			}
		}()
	}
}

// setCut cuts (true: closes every connection, refuses new ones) or
// restores (false) the proxy.
func (p *ctlProxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	var toClose []net.Conn
	if cut {
		for c := range p.conns {
			toClose = append(toClose, c)
		}
		p.conns = map[net.Conn]struct{}{}
	}
	p.mu.Unlock()
	for _, c := range toClose {
		c.Close()
	}
}

func (p *ctlProxy) close() {
	p.ln.Close()
	p.setCut(true)
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.t.Logf("controller proxy %s: connections did not close within 5s", p.Addr())
	}
}
