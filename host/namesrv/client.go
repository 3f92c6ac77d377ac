package namesrv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// nsClient is the registrar's connection to one name server. It keeps one
// connection open between calls, as a RocketMQ broker keeps one channel
// per name server: the name server drops a broker when the connection its
// registration came on closes, so a connection per call (remoting.Call)
// would unregister the broker as soon as each registration returned.
//
// Calls are serialized; requests the name server sends on the connection
// are read past and ignored. A call on a connection that turns out to be
// dead (the name server restarted since the last call) is retried once on
// a new one.
type nsClient struct {
	addr string

	mu     sync.Mutex
	nc     net.Conn
	br     *bufio.Reader
	opaque int32
}

func newNSClient(addr string) *nsClient { return &nsClient{addr: addr} }

// call sends cmd and returns the name server's response; cmd's Opaque,
// Flag, Language and Version are set here. ctx bounds the whole call and
// must have a deadline. A response with a code other than SUCCESS is not
// an error.
func (c *nsClient) call(ctx context.Context, cmd *remoting.Command) (*remoting.Command, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reused := c.nc != nil
	resp, err := c.callLocked(ctx, cmd)
	if err != nil && reused && ctx.Err() == nil {
		resp, err = c.callLocked(ctx, cmd)
	}
	return resp, err
}

func (c *nsClient) callLocked(ctx context.Context, cmd *remoting.Command) (*remoting.Command, error) {
	if c.nc == nil {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return nil, fmt.Errorf("connecting to name server %s: %w", c.addr, err)
		}
		c.nc, c.br = nc, bufio.NewReader(nc)
	}
	nc := c.nc
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	c.opaque++
	cmd.Opaque, cmd.Flag, cmd.Language, cmd.Version = c.opaque, 0, remoting.ServerLanguage, remoting.ServerVersion
	if _, err := nc.Write(cmd.AppendFrame(nil)); err != nil {
		c.closeLocked()
		return nil, fmt.Errorf("sending code %d to name server %s: %w", cmd.Code, c.addr, err)
	}
	for {
		resp, err := remoting.ReadCommand(c.br, remoting.DefaultMaxFrame)
		if err != nil {
			c.closeLocked()
			return nil, fmt.Errorf("reading the answer to code %d from name server %s: %w", cmd.Code, c.addr, err)
		}
		if resp.IsResponse() && resp.Opaque == cmd.Opaque {
			return resp, nil
		}
	}
}

func (c *nsClient) closeLocked() {
	if c.nc != nil {
		c.nc.Close()
		c.nc, c.br = nil, nil
	}
}

// close closes the connection, if open.
func (c *nsClient) close() {
	c.mu.Lock()
	c.closeLocked()
	c.mu.Unlock()
}

// aLongTimeAgo, as a deadline, makes blocked reads and writes fail now.
var aLongTimeAgo = time.Unix(1, 0)

// errNotSuccess wraps a name server's refusal.
var errNotSuccess = errors.New("name server refused")
