package host

import "math"

// nodeConfirm is the store's ConfirmSource on a node with a replication
// plugin: what consumers may see, as the role in force says. A slave sees
// everything it holds (its master decided what was acknowledged); a master
// whose replication policy is VisibleAfterReplicated sees what its
// replicas acknowledged under the acknowledgement rule in force
// (storehost.Host.Covered: in cluster mode also held by the SyncStateSet's
// replicas), but never less than it held when it was promoted (those
// bytes came from the previous master); any other master, all.
// It follows role changes at run time (promotion, following a new master
// in cluster mode), which a source fixed when the store opened could not.
type nodeConfirm struct{ n *Node }

func (c nodeConfirm) ConfirmOffset() int64 {
	n := c.n
	p := n.ackPolicy()
	if n.slave.Load() || !p.Replication.VisibleAfterReplicated || n.host == nil {
		return math.MaxInt64
	}
	return max(n.confirmFloor.Load(), n.host.Covered(p))
}
