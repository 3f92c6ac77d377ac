package host

import (
	"time"

	"github.com/keelmq/keel/sdk"
)

// StatusReport is /status.
type StatusReport struct {
	// Roles are the process roles (server.roles); Role is the broker's
	// replication role, "" without the broker role.
	Roles     []string          `json:"roles"`
	Role      string            `json:"role,omitempty"`
	Epoch     int32             `json:"epoch"`
	Uptime    string            `json:"uptime"`
	Listeners map[string]string `json:"listeners"`
	Offsets   map[string]int64  `json:"offsets"`
	DiskUsed  float64           `json:"disk_used_ratio"`
	// Writable is "yes", or why appends are refused: the store's own
	// Writable error first (disk full, read-only, closed), then a
	// replication fence, then a degraded plugin.
	Writable string `json:"writable"`
	// DispatchLag is committed minus dispatched: log bytes not yet in the
	// consume queues and indexes.
	DispatchLag int64              `json:"dispatch_lag_bytes"`
	Plugins     []pluginStatusJSON `json:"plugins"`
	// ConsumerLag is each consumer group's lag (messages behind) on each
	// queue of the topics it has committed offsets for.
	ConsumerLag []queueLag `json:"consumer_lag"`
	Replication sdk.ReplicationState
	FlushPolicy sdk.FlushPolicy       `json:"flush_policy"`
	ReplPolicy  sdk.ReplicationPolicy `json:"replication_policy"`
}

type pluginStatusJSON struct {
	Kind     sdk.Kind       `json:"kind"`
	Name     string         `json:"name"`
	External bool           `json:"external"`
	State    string         `json:"state"`
	Reason   string         `json:"reason,omitempty"`
	Status   map[string]any `json:"status,omitempty"`
	// External plugins only.
	Pid         int        `json:"pid,omitempty"`
	Restarts    int        `json:"restarts,omitempty"`
	LastCrash   *time.Time `json:"last_crash,omitempty"`
	LastRestart *time.Time `json:"last_restart,omitempty"`
}

// Status reports the node's state.
func (n *Node) Status() StatusReport {
	if n.store == nil { // no broker role: name server and/or controller
		st := StatusReport{Roles: n.prof.Server.Roles, Uptime: time.Since(n.started).Round(time.Second).String(), Listeners: map[string]string{}}
		n.addListeners(&st)
		return st
	}
	p := n.store.Positions()
	st := StatusReport{
		Role:   n.currentRole(),
		Uptime: time.Since(n.started).Round(time.Second).String(),
		Offsets: map[string]int64{"min": p.Min, "dispatched": p.Dispatched, "confirm": p.Confirm,
			"flushed": p.Flushed, "committed": p.Committed},
		DiskUsed:    n.store.DiskUsedRatio(),
		DispatchLag: p.Committed - p.Dispatched,
		Listeners:   map[string]string{},
		Replication: n.host.Replication(),
		FlushPolicy: n.flushPolicy,
		ReplPolicy:  n.replicationPolicy(),
	}
	if e, ok := n.store.Epochs().Last(); ok {
		st.Epoch = e.Epoch
	}
	st.Roles = n.prof.Server.Roles
	st.Writable = n.WriteRefusal()
	n.addListeners(&st)
	if a := n.haAddr(); a != "" {
		st.Listeners["ha"] = a
	}
	st.Plugins = n.pluginStatuses()
	st.ConsumerLag = n.consumerLag()
	return st
}

// pluginStatuses reports each loaded plugin's state, its own status while
// it runs, and for an external one its process (nil without plugins).
func (n *Node) pluginStatuses() []pluginStatusJSON {
	var out []pluginStatusJSON
	for _, lp := range n.plugins {
		s, why := lp.getState()
		ps := pluginStatusJSON{Kind: lp.kind, Name: lp.name, External: lp.external, State: s, Reason: why}
		if s == stateRunning {
			ps.Status = n.pluginStatus(lp.p)
		}
		if sv := supervisorOf(lp.p); sv != nil {
			var crash, restart time.Time
			ps.Pid, ps.Restarts, crash, restart = sv.processInfo()
			if !crash.IsZero() {
				ps.LastCrash = &crash
			}
			if !restart.IsZero() {
				ps.LastRestart = &restart
			}
		}
		out = append(out, ps)
	}
	return out
}

// addListeners lists the bound listeners in st.
func (n *Node) addListeners(st *StatusReport) {
	for _, role := range []string{"namesrv", "broker", "controller", "admin"} {
		if a := n.Addr(role); a != "" {
			st.Listeners[role] = a
		}
	}
}
