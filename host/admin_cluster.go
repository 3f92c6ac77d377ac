package host

import (
	"net/http"
	"time"

	"github.com/keelmq/keel/host/controller"
)

// ClusterReport is GET /admin/cluster: what this node knows of cluster
// mode. Controller is set on a node with the controller role, Broker on a
// broker in cluster mode (controller.addrs set); a node with both roles
// has both. A node with neither answers 404.
type ClusterReport struct {
	Controller *ControllerView `json:"controller,omitempty"`
	Broker     *ClusterBroker  `json:"broker,omitempty"`
}

// ControllerView is the controller's state as this controller node has
// applied it: on a follower the groups may lag the leader's by the raft
// replication delay.
type ControllerView struct {
	// NodeID is this controller's raft server id.
	NodeID string `json:"node_id"`
	// LeaderID and LeaderAddr name the raft leader and the remoting
	// address it announced ("" while there is none, or before its
	// announcement committed).
	LeaderID   string `json:"leader_id"`
	LeaderAddr string `json:"leader_addr"`
	// IsLeader: this node leads and serves the brokers.
	IsLeader bool `json:"is_leader"`
	// Groups are every broker group, sorted by cluster and broker name,
	// in controller.Group's encoding, with the master's address.
	Groups []ClusterGroup `json:"groups"`
}

// ClusterGroup is a controller.Group with its master's addresses
// resolved from the members ("" when the group has no master).
type ClusterGroup struct {
	controller.Group
	MasterAddr   string `json:"masterAddr"`
	MasterHAAddr string `json:"masterHaAddr"`
}

// ClusterBroker is a cluster-mode broker's view of its membership.
type ClusterBroker struct {
	// BrokerID is the id the controller gave this broker (0 before it
	// registered).
	BrokerID int64 `json:"broker_id"`
	// Role is the replication role the broker is in now (master or
	// slave): it follows the controller's choice once applied.
	Role string `json:"role"`
	// GroupKnown is false until the controller first answered; Group is
	// the group as the controller last answered (nil before).
	GroupKnown bool          `json:"group_known"`
	Group      *ClusterGroup `json:"group,omitempty"`
	// Lease is the master's lease (2/3 of controller.heartbeat_timeout);
	// Leased reports whether the controller lists this broker as master
	// and answered within the lease on a connection still open (a slave
	// is never leased).
	Lease  string `json:"lease"`
	Leased bool   `json:"leased"`
	// LastContact is when the last call the controller leader answered
	// was sent (nil before any).
	LastContact *time.Time `json:"last_contact,omitempty"`
	// Writable is the node's write verdict (WriteRefusal): "yes" or why
	// appends are refused, the lease included.
	Writable string `json:"writable"`
}

// ClusterReport returns the cluster view; ok is false on a node with
// neither the controller role nor cluster mode.
func (n *Node) ClusterReport() (ClusterReport, bool) {
	var r ClusterReport
	if n.ctl != nil {
		r.Controller = controllerView(n.prof.Controller.NodeID, n.ctl)
	}
	if c := n.cluster; c != nil {
		r.Broker = clusterBrokerView(n, c)
	}
	return r, r.Controller != nil || r.Broker != nil
}

func controllerView(nodeID string, ctl *controller.Controller) *ControllerView {
	id, addr := ctl.Leader()
	v := &ControllerView{NodeID: nodeID, LeaderID: id, LeaderAddr: addr, IsLeader: ctl.IsLeader(), Groups: []ClusterGroup{}}
	for _, g := range ctl.Groups() {
		v.Groups = append(v.Groups, clusterGroup(g))
	}
	return v
}

func clusterGroup(g controller.Group) ClusterGroup {
	out := ClusterGroup{Group: g}
	if m, ok := g.Master(); ok {
		out.MasterAddr, out.MasterHAAddr = m.Addr, m.HAAddr
	}
	return out
}

func clusterBrokerView(n *Node, c *clusterMember) *ClusterBroker {
	id, g, known := c.state()
	b := &ClusterBroker{BrokerID: id, Role: n.currentRole(), GroupKnown: known, Lease: c.lease.String(),
		Leased: c.leased(), Writable: n.WriteRefusal()}
	if known {
		cg := clusterGroup(g)
		b.Group = &cg
	}
	if t := c.agent.LastContact(); !t.IsZero() {
		b.LastContact = &t
	}
	return b
}

// cluster serves GET /admin/cluster (ClusterReport).
func (a *adminAPI) cluster(w http.ResponseWriter, _ *http.Request) {
	r, ok := a.n.ClusterReport()
	if !ok {
		writeError(w, http.StatusNotFound, "this node runs neither the controller role (server.roles) nor a broker in cluster mode (controller.addrs)")
		return
	}
	writeJSON(w, http.StatusOK, r)
}
