package host

import (
	"context"
	"fmt"
	"io"

	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/host/remoting"
)

// startController runs this process's member of the controller raft group
// (server.roles has controller): its remoting server on the controller
// listener bindListeners bound, then raft.
func (n *Node) startController(ctx context.Context, srvCfg remoting.ServerConfig) error {
	c := n.prof.Controller
	peers, err := profile.ParsePeers(c.Peers)
	if err != nil {
		return fmt.Errorf("controller.peers: %w", err)
	}
	l := n.listeners["controller"]
	ctl, err := controller.New(controller.Config{
		NodeID: c.NodeID, RaftAddr: c.RaftAddr, RemotingAddr: l.Addr().String(), Dir: c.Dir, Peers: peers,
		HeartbeatTimeout: c.HeartbeatTimeout.D(), ElectUnclean: c.ElectUnclean,
		Logger: n.log.With("component", "controller"),
	})
	if err != nil {
		return err
	}
	srv := remoting.NewServer(srvCfg)
	ctl.Register(srv)
	n.servers = append(n.servers, srv)
	go srv.Serve(l)
	if err := ctl.Start(ctx); err != nil {
		return fmt.Errorf("start the controller (controller.raft_addr %s, dir %s): %w", c.RaftAddr, c.Dir, err)
	}
	n.ctl = ctl
	return nil
}

// writeControllerMetrics writes the controller's series (elections), if
// this process runs one.
func (n *Node) writeControllerMetrics(w io.Writer) {
	if n.ctl != nil {
		n.ctl.Metrics().WritePrometheus(w)
	}
}
