package remoting

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testClient is a minimal remoting client for tests: it sends requests,
// matches responses by opaque, and collects server-initiated requests.
type testClient struct {
	t       testing.TB
	nc      net.Conn
	opaque  atomic.Int32
	wmu     sync.Mutex
	mu      sync.Mutex
	waiters map[int32]chan *Command
	// inbound receives server-initiated requests.
	inbound chan *Command
	// arrivals records response opaques in arrival order.
	arrivals []int32
	done     chan struct{}
	err      error
}

func dialTest(t testing.TB, addr string) *testClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c := &testClient{t: t, nc: nc, waiters: map[int32]chan *Command{}, inbound: make(chan *Command, 64), done: make(chan struct{})}
	go c.readLoop()
	t.Cleanup(func() { nc.Close() })
	return c
}

func (c *testClient) readLoop() {
	defer close(c.done)
	br := bufio.NewReader(c.nc)
	for {
		cmd, err := ReadCommand(br, 1<<30)
		if err != nil {
			c.err = err
			return
		}
		if !cmd.IsResponse() {
			select {
			case c.inbound <- cmd:
			default:
			}
			continue
		}
		c.mu.Lock()
		c.arrivals = append(c.arrivals, cmd.Opaque)
		ch := c.waiters[cmd.Opaque]
		delete(c.waiters, cmd.Opaque)
		c.mu.Unlock()
		if ch != nil {
			ch <- cmd
		}
	}
}

// start sends a request and returns a channel for its response.
func (c *testClient) start(cmd *Command) <-chan *Command {
	cmd.Opaque = c.opaque.Add(1)
	cmd.Language = "GO"
	cmd.Version = 317
	ch := make(chan *Command, 1)
	c.mu.Lock()
	c.waiters[cmd.Opaque] = ch
	c.mu.Unlock()
	c.write(cmd.AppendFrame(nil))
	return ch
}

func (c *testClient) write(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Logf("test client write: %v", err)
	}
}

// call sends a request and waits up to timeout for its response.
func (c *testClient) callTimeout(cmd *Command, timeout time.Duration) (*Command, error) {
	ch := c.start(cmd)
	select {
	case r := <-ch:
		return r, nil
	case <-c.done:
		return nil, fmt.Errorf("connection closed: %v", c.err)
	case <-time.After(timeout):
		return nil, context.DeadlineExceeded
	}
}

func (c *testClient) call(code int16, ext map[string]string, body []byte) *Command {
	c.t.Helper()
	r, err := c.callTimeout(&Command{Code: code, ExtFields: FieldsOf(ext), Body: body}, 5*time.Second)
	if err != nil {
		c.t.Fatalf("call code %d: %v", code, err)
	}
	return r
}

// waitClosed waits until the server closes the connection.
func (c *testClient) waitClosed(timeout time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(timeout):
		return false
	}
}
