package pluginrpc

import (
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
	"github.com/keelmq/keel/sdk"
)

// Client is a running external plugin process. Its methods are safe for
// concurrent use.
type Client struct {
	pc   *plugin.Client
	rpc  *plugin.GRPCClient
	conn *pluginwire.Conn
	desc *pluginpb.Description
	path string
	log  *slog.Logger
	// socketDir is where lanes listen (DialOptions.SocketDir); noLane
	// keeps Host calls on gRPC (DialOptions.NoLane).
	socketDir string
	noLane    bool
	cmd       *exec.Cmd // the plugin's process, started (see ownGroup)

	once  sync.Once
	flush *RemoteFlushStrategy
	repl  *RemoteReplicator
	index *RemoteIndexer
}

func (c *Client) lazyInit() {
	c.once.Do(func() {
		conn := c.conn.Conn
		c.flush = &RemoteFlushStrategy{c.newRemote(sdk.KindFlush, pluginpb.NewFlushStrategyClient(conn))}
		rc := pluginpb.NewReplicatorClient(conn)
		c.repl = &RemoteReplicator{remotePlugin: c.newRemote(sdk.KindReplication, rc), rc: rc}
		ic := pluginpb.NewIndexerClient(conn)
		c.index = &RemoteIndexer{remotePlugin: c.newRemote(sdk.KindIndex, ic), ic: ic}
	})
}

// Path is the plugin binary's path.
func (c *Client) Path() string { return c.path }

// Pid is the plugin process id as the plugin reported it.
func (c *Client) Pid() int { return int(c.desc.Pid) }

// Kinds lists the plugin kinds the binary serves.
func (c *Client) Kinds() []sdk.Kind {
	ks := make([]sdk.Kind, len(c.desc.Kinds))
	for i, k := range c.desc.Kinds {
		ks[i] = sdk.Kind(k)
	}
	return ks
}

// Serves reports whether the binary serves kind k.
func (c *Client) Serves(k sdk.Kind) bool { return slices.Contains(c.desc.Kinds, string(k)) }

// Ping checks the plugin answers (gRPC health check). An error means it
// is gone or hung; it wraps sdk.ErrUnavailable.
func (c *Client) Ping() error {
	if err := c.rpc.Ping(); err != nil {
		return fmt.Errorf("ping plugin %s: %w: %w", c.path, sdk.ErrUnavailable, err)
	}
	return nil
}

// Exited reports whether the plugin process has exited (crashed, killed,
// or ended by itself).
func (c *Client) Exited() bool { return c.pc.Exited() }

// Done is closed when the plugin process exits, for whatever reason; the
// host watches it to detect crashes. Calls to a plugin that exited fail
// with errors matching sdk.ErrUnavailable.
func (c *Client) Done() <-chan struct{} { return c.conn.Done.Done() }

// Kill ends the plugin process: it asks it to shut down and kills it if it
// does not within a couple of seconds, and blocks until it exited. If that
// takes longer than killGroupAfter (a process the plugin started holds its
// output open), everything in the plugin's process group is killed. It
// does not call Stop on the plugin; the host stops plugins first. Safe to
// call more than once.
func (c *Client) Kill() {
	t := time.AfterFunc(killGroupAfter, func() { killGroup(c.cmd) })
	defer t.Stop()
	c.pc.Kill()
}

// serving returns an error wrapping sdk.ErrNotSupported unless the binary
// serves kind k (what names the kind's plugin for the message).
func (c *Client) serving(k sdk.Kind, what string) error {
	if !c.Serves(k) {
		return fmt.Errorf("plugin %s serves no %s: %w", c.path, what, sdk.ErrNotSupported)
	}
	c.lazyInit()
	return nil
}

// FlushStrategy returns the binary's flush strategy; sdk.ErrNotSupported
// if it does not serve one. Every call returns the same value.
func (c *Client) FlushStrategy() (*RemoteFlushStrategy, error) {
	if err := c.serving(sdk.KindFlush, "flush strategy"); err != nil {
		return nil, err
	}
	return c.flush, nil
}

// Replicator returns the binary's replicator; sdk.ErrNotSupported if it
// does not serve one. Every call returns the same value.
func (c *Client) Replicator() (*RemoteReplicator, error) {
	if err := c.serving(sdk.KindReplication, "replicator"); err != nil {
		return nil, err
	}
	return c.repl, nil
}

// Indexer returns the binary's indexer; sdk.ErrNotSupported if it does not
// serve one. Every call returns the same value.
func (c *Client) Indexer() (*RemoteIndexer, error) {
	if err := c.serving(sdk.KindIndex, "indexer"); err != nil {
		return nil, err
	}
	return c.index, nil
}
