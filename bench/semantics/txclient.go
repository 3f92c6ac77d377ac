package semantics

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// client is a pipelined remoting connection: any number of goroutines
// call it at once; responses are matched to requests by opaque. It
// encodes and decodes every frame in full (host/remoting's codec), so it
// is costlier per message than bench/wire's generator, which is why the
// transaction entry compares it with itself on plain sends.
type client struct {
	nc     net.Conn
	opaque atomic.Int32
	wmu    sync.Mutex

	mu      sync.Mutex
	pending map[int32]chan *remoting.Command
	err     error
}

func dialClient(ctx context.Context, addr string) (*client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("semantics: dial broker %s: %w", addr, err)
	}
	c := &client{nc: nc, pending: map[int32]chan *remoting.Command{}}
	go c.readLoop()
	return c, nil
}

func (c *client) close() {
	c.fail(net.ErrClosed)
	_ = c.nc.Close()
}

// fail ends every pending call with err (the first failure wins).
func (c *client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	for op, ch := range c.pending {
		close(ch)
		delete(c.pending, op)
	}
}

func (c *client) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		cmd, err := remoting.ReadCommand(br, remoting.DefaultMaxFrame)
		if err != nil {
			c.fail(fmt.Errorf("read response: %w", err))
			return
		}
		if !cmd.IsResponse() {
			continue // a broker request (a transaction check): none is answered
		}
		c.mu.Lock()
		ch, ok := c.pending[cmd.Opaque]
		delete(c.pending, cmd.Opaque)
		c.mu.Unlock()
		if ok {
			ch <- cmd
		}
	}
}

// call sends cmd (its Opaque, Language and Version set here) and waits up
// to timeout for its response.
func (c *client) call(cmd *remoting.Command, timeout time.Duration) (*remoting.Command, error) {
	cmd.Opaque, cmd.Language, cmd.Version = c.opaque.Add(1), "GO", 317
	ch := make(chan *remoting.Command, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[cmd.Opaque] = ch
	c.mu.Unlock()
	frame := cmd.AppendFrame(nil)
	c.wmu.Lock()
	_, err := c.nc.Write(frame)
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("write request: %w", err))
		return nil, fmt.Errorf("send code %d: %w", cmd.Code, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case resp, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return nil, fmt.Errorf("code %d: %w", cmd.Code, err)
		}
		return resp, nil
	case <-t.C:
		c.mu.Lock()
		delete(c.pending, cmd.Opaque)
		c.mu.Unlock()
		return nil, fmt.Errorf("code %d: no response within %v", cmd.Code, timeout)
	}
}
