package profile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keelmq/keel/host/controller"
)

// validateRoles checks server.roles and what a broker needs to register
// with name servers.
func (p *Profile) validateRoles(fail failFunc) {
	sv := &p.Server
	if len(sv.Roles) == 0 {
		fail("server.roles", "must name at least one of %q, %q, %q", RoleNamesrv, RoleBroker, RoleController)
	}
	for i, r := range sv.Roles {
		switch {
		case r != RoleNamesrv && r != RoleBroker && r != RoleController:
			fail("server.roles", "unknown role %q (want %q, %q or %q)", r, RoleNamesrv, RoleBroker, RoleController)
		case slices.Contains(sv.Roles[:i], r):
			fail("server.roles", "role %q is listed twice", r)
		}
	}
	for _, a := range sv.NamesrvAddrs {
		if msg := checkAddr(a, false); msg != "" {
			fail("server.namesrv_addrs", "%s", msg)
		}
	}
	if p.HasRole(RoleBroker) && !p.HasRole(RoleNamesrv) && len(sv.NamesrvAddrs) == 0 {
		fail("server.namesrv_addrs", "a broker without its own name server (server.roles has no %q) must register with at least one: set server.namesrv_addrs", RoleNamesrv)
	}
	if d := sv.RegisterInterval.D(); d < time.Second || d > time.Minute {
		fail("server.register_interval", "%s is out of range (want 1s to 60s)", sv.RegisterInterval)
	}
}

// validateController checks the [controller] section: the controller this
// process runs, and the controllers a cluster-mode broker follows.
func (p *Profile) validateController(fail failFunc) {
	c := &p.Controller
	for _, a := range c.Addrs {
		if msg := checkAddr(a, false); msg != "" {
			fail("controller.addrs", "%s", msg)
		}
	}
	if len(c.Addrs) > 0 {
		switch {
		case !p.HasRole(RoleBroker):
			fail("controller.addrs", "only a broker follows controllers (server.roles has no %q)", RoleBroker)
		case p.present([]string{"replication", "role"}):
			fail("replication.role", "in cluster mode (controller.addrs is set) the controller decides the role: leave replication.role unset")
		case p.Replication.MasterAddr != "":
			fail("replication.master_addr", "in cluster mode (controller.addrs is set) the controller names the master: leave replication.master_addr unset")
		case !Chosen(p.Replication.Plugin, p.Replication.Path):
			fail("replication.plugin", `cluster mode (controller.addrs is set) needs a replication plugin, but replication.plugin is "none"`)
		}
		if msg := checkAddr(p.Server.HAAddr, false); msg != "" {
			fail("server.ha_addr", "in cluster mode the controller hands this address to the group's slaves, so it must be one they can dial: %s", msg)
		}
	}
	if !p.HasRole(RoleController) {
		return
	}
	if c.NodeID == "" || strings.ContainsAny(c.NodeID, "= \t\r\n") {
		fail("controller.node_id", "%q must be non-empty, without spaces or '='", c.NodeID)
	}
	if c.Dir == "" {
		fail("controller.dir", "must not be empty")
	}
	if d := c.HeartbeatTimeout.D(); d < 100*time.Millisecond {
		fail("controller.heartbeat_timeout", "%s is too short (want at least 100ms)", c.HeartbeatTimeout)
	}
	peers, err := ParsePeers(c.Peers)
	if err != nil {
		fail("controller.peers", "%v", err)
		return
	}
	self := slices.IndexFunc(peers, func(pe controller.Peer) bool { return pe.ID == c.NodeID })
	switch {
	case self < 0:
		fail("controller.peers", "controller.node_id %q is not among the peers %v", c.NodeID, c.Peers)
	case peers[self].Addr != c.RaftAddr:
		fail("controller.peers", "peer %s has address %s, but controller.raft_addr is %s", c.NodeID, peers[self].Addr, c.RaftAddr)
	}
}

// ParsePeers parses controller.peers ("id=host:port" each) into the raft
// group's members, refusing an empty id, a bad address and repeats.
func ParsePeers(list []string) ([]controller.Peer, error) {
	out := make([]controller.Peer, 0, len(list))
	for _, s := range list {
		id, addr, ok := strings.Cut(s, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("%q: want id=host:port", s)
		}
		if msg := checkAddr(addr, false); msg != "" {
			return nil, fmt.Errorf("%q: %s", s, msg)
		}
		for _, p := range out {
			if p.ID == id || p.Addr == addr {
				return nil, fmt.Errorf("%q repeats the id or the address of %s=%s", s, p.ID, p.Addr)
			}
		}
		out = append(out, controller.Peer{ID: id, Addr: addr})
	}
	return out, nil
}
