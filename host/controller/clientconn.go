package controller

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/keelmq/keel/host/remoting"
)

// errConnBroken marks a call that failed on the connection itself (dial,
// write, read, closed), as opposed to a controller's answer.
var errConnBroken = errors.New("controller connection broken")

// clientConn is one persistent connection to a controller: requests are
// matched to responses by opaque, so calls may overlap. When the
// connection breaks every pending call fails and the conn is dead for
// good (the Client dials a new one).
type clientConn struct {
	addr   string
	nc     net.Conn
	opaque atomic.Int32

	wmu sync.Mutex

	mu      sync.Mutex
	pending map[int32]chan *remoting.Command
	dead    error
	done    chan struct{}
}

func dialConn(ctx context.Context, addr string) (*clientConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dialing controller %s: %v", errConnBroken, addr, err)
	}
	cc := &clientConn{addr: addr, nc: nc, pending: map[int32]chan *remoting.Command{}, done: make(chan struct{})}
	go cc.readLoop()
	return cc, nil
}

func (cc *clientConn) readLoop() {
	br := bufio.NewReader(cc.nc)
	for {
		cmd, err := remoting.ReadCommand(br, remoting.DefaultMaxFrame)
		if err != nil {
			cc.fail(fmt.Errorf("%w: reading from controller %s: %v", errConnBroken, cc.addr, err))
			return
		}
		if !cmd.IsResponse() {
			continue // the controller sends no requests to brokers yet
		}
		cc.mu.Lock()
		ch := cc.pending[cmd.Opaque]
		delete(cc.pending, cmd.Opaque)
		cc.mu.Unlock()
		if ch != nil {
			ch <- cmd
		}
	}
}

func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.dead != nil {
		return
	}
	cc.dead = err
	cc.nc.Close()
	close(cc.done)
}

func (cc *clientConn) broken() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dead != nil
}

// invoke sends cmd (a private copy: opaque and flags are set here) and
// waits for its response or ctx.
func (cc *clientConn) invoke(ctx context.Context, cmd remoting.Command) (*remoting.Command, error) {
	cmd.Opaque = cc.opaque.Add(1)
	cmd.Flag, cmd.Language, cmd.Version = 0, remoting.ServerLanguage, remoting.ServerVersion
	ch := make(chan *remoting.Command, 1)
	cc.mu.Lock()
	if cc.dead != nil {
		err := cc.dead
		cc.mu.Unlock()
		return nil, err
	}
	cc.pending[cmd.Opaque] = ch
	cc.mu.Unlock()
	defer func() {
		cc.mu.Lock()
		delete(cc.pending, cmd.Opaque)
		cc.mu.Unlock()
	}()
	frame := cmd.AppendFrame(nil)
	cc.wmu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		cc.nc.SetWriteDeadline(dl)
	}
	_, err := cc.nc.Write(frame)
	cc.wmu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: sending code %d to controller %s: %v", errConnBroken, cmd.Code, cc.addr, err)
		cc.fail(err)
		return nil, err
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-cc.done:
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return nil, cc.dead
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for controller %s to answer code %d: %w", cc.addr, cmd.Code, ctx.Err())
	}
}

func (cc *clientConn) close() { cc.fail(fmt.Errorf("%w: closed", errConnBroken)) }
