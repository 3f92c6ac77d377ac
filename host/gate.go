package host

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/keelmq/keel/host/remoting"
)

// writeGate is the node's one answer to "may this node take writes now,
// and if not, why". It holds the host's reasons — this node is a slave, the
// replication plugin fenced writes, a plugin the acknowledgement path
// depends on is down — folded into one value that is recomputed whenever
// one of them changes (Promote, a replication report that moves the
// fence, a plugin state change) and read with one atomic load per send.
// The store's own reasons (closed, read-only after an fsync error, disk
// full) stay the store's: core checks them under its append path, and
// Refusal adds them for reports such as /status.
//
// Sources must be updated before update is called; update serialises
// recomputations, so the last one to finish reflects every change that
// preceded its call.
type writeGate struct {
	mu  sync.Mutex
	why atomic.Pointer[gateRefusal] // nil while writes are allowed
}

// gateRefusal is why the gate is closed.
type gateRefusal struct {
	err error
	why string // the reason alone, as /status shows it
	// plugin is set when the reason is a plugin that is down: such a
	// refusal counts as an append error in /metrics (a slave or a fenced
	// master refusing writes is their normal state, not an error).
	plugin bool
}

// update recomputes the gate from the node's sources.
func (g *writeGate) update(n *Node) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var r *gateRefusal
	refuse := func(why string, plugin bool) *gateRefusal {
		return &gateRefusal{err: fmt.Errorf("%w: %s", remoting.ErrServiceUnavailable, why), why: why, plugin: plugin}
	}
	if n.slave.Load() {
		r = refuse("this broker is a slave; send to the master", false)
	} else if why := n.cluster.refusalOrNone(); why != "" {
		r = refuse("cluster mode: "+why, false)
	} else if why := n.fenced(); why != "" {
		r = refuse("writes fenced by replication: "+why, false)
	} else if why := n.pluginsDegraded(); why != "" {
		r = refuse(why, true)
	}
	g.why.Store(r)
}

// refused returns the host's reason to refuse writes, or nil: one atomic
// load, for the send path.
func (g *writeGate) refused() *gateRefusal { return g.why.Load() }

// fenced is the replication fence's reason, or "" when writes are not
// fenced (or there is no replication host yet).
func (n *Node) fenced() string {
	if n.host == nil {
		return ""
	}
	if f, why := n.host.Fenced(); f {
		return why
	}
	return ""
}

// setSlave sets whether this node is a slave and reopens or closes the
// write gate accordingly.
func (n *Node) setSlave(slave bool) {
	n.slave.Store(slave)
	n.gate.update(n)
}

// WriteRefusal is why this node would refuse a send right now, as /status
// shows it ("writable"): "yes", or the write gate's reason, else the
// store's own (core.Store.Writable).
func (n *Node) WriteRefusal() string {
	if r := n.gate.refused(); r != nil {
		return r.why
	}
	if err := n.store.Writable(); err != nil {
		return err.Error()
	}
	return "yes"
}
