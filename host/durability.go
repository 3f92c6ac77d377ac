package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/replication"
)

// DurabilityRow is one line of a profile's durability table.
type DurabilityRow struct {
	Question string
	Answer   string
}

// Replication is what the loaded replication plugin declares about
// itself, as the durability table reads it: nothing is assumed from the
// plugin's name, and builtin, compiled-in and external plugins are read
// the same way.
type Replication struct {
	// Policy is the plugin's AckPolicy (zero on a slave, which acks
	// nothing itself).
	Policy sdk.ReplicationPolicy
	// Promotes: the plugin implements sdk.Promoter, so keel admin promote
	// can make this node (a slave) the master. For an external plugin its
	// handshake says so.
	Promotes bool
	// ReplicaAck is what a replica's acknowledgement means:
	// replication.AckReceived (the replica appended the bytes, in its page
	// cache), replication.AckFlushed (it fsynced them first), or "" when
	// the plugin does not say. A plugin says it with an "ack_on" member of
	// its sdk.StatusReporter object, as sdk/replication's Node does;
	// sdk.ReplicationPolicy has no field for it.
	ReplicaAck string
}

// declaredReplication reads what r (the configured replicator, nil for
// none) declares; policy is the AckPolicy the node uses.
func declaredReplication(ctx context.Context, r sdk.Replicator, policy sdk.ReplicationPolicy) Replication {
	d := Replication{Policy: policy}
	if r == nil {
		return d
	}
	if e, ok := r.(*extRepl); ok {
		d.Promotes = e.promotes()
	} else {
		_, d.Promotes = r.(sdk.Promoter)
	}
	if sr, ok := r.(sdk.StatusReporter); ok {
		if b, err := sr.Status(ctx); err == nil {
			var st struct {
				AckOn string `json:"ack_on"`
			}
			if json.Unmarshal(b, &st) == nil && (st.AckOn == replication.AckReceived || st.AckOn == replication.AckFlushed) {
				d.ReplicaAck = st.AckOn
			}
		}
	}
	return d
}

// notSaid is the table's answer where the plugin declares nothing.
const notSaid = "the plugin does not say"

// replicaHolds says what a replica's acknowledgement means.
func (r Replication) replicaHolds() string {
	switch r.ReplicaAck {
	case replication.AckFlushed:
		return "a replica acknowledges after fsyncing the bytes"
	case replication.AckReceived:
		return "a replica acknowledges on receipt, before any fsync"
	}
	return "whether a replica acknowledges on receipt or after fsync, " + notSaid
}

// noPromote says that the replicator cannot promote a slave.
const noPromote = "the replicator cannot promote a slave (it does not implement sdk.Promoter; keel admin promote answers not supported)"

// Durability answers, for what a profile's plugins declared: when the
// producer's ack is sent, and what survives a process crash, a power loss
// and the loss of the master, and what consumers see. role is
// replication.role; flushName names the flush plugin (profile.PluginName);
// replicated says whether the [replication] section selects a plugin
// (profile.Chosen). Where the plugin declares nothing about something the
// answer says so (notSaid) rather than guessing. The benchmark measures
// these claims (recovery workload: acked messages lost per crash kind).
func Durability(role string, fp sdk.FlushPolicy, r Replication, flushName string, replicated bool) []DurabilityRow {
	rp := r.Policy
	var ack []string
	if fp.WaitFlush {
		ack = append(ack, fmt.Sprintf("after fdatasync on this machine (FLUSH_DISK_TIMEOUT after %s, message kept)", fp.Timeout))
	}
	if rp.WaitReplicas > 0 {
		fewer := "SLAVE_NOT_AVAILABLE at once with fewer in sync"
		if rp.AllowFewer {
			fewer = fmt.Sprintf("with fewer in sync but at least %d, after those; with none and min_in_sync_replicas 0, without any replica; SLAVE_NOT_AVAILABLE below that", rp.MinReplicas)
		}
		ack = append(ack, fmt.Sprintf("after %d replica(s) acknowledged it (FLUSH_SLAVE_TIMEOUT after %s; %s; %s)", rp.WaitReplicas, rp.Timeout, fewer, r.replicaHolds()))
	}
	if len(ack) == 0 {
		ack = append(ack, "as soon as it is written to the page cache (no durability wait)")
	}
	rows := []DurabilityRow{{"producer ack sent", strings.Join(ack, "; and ")}}
	rows = append(rows, DurabilityRow{"process crash (kill -9)",
		"every acknowledged message: written bytes are in the kernel's page cache, which outlives the process; recovery cuts only a record torn mid-copy, which was never acknowledged"})
	switch {
	case fp.WaitFlush:
		rows = append(rows, DurabilityRow{"power loss", "every acknowledged message (it was fsynced before the ack)"})
	case rp.WaitReplicas > 0 && r.ReplicaAck == replication.AckFlushed:
		rows = append(rows, DurabilityRow{"power loss", fmt.Sprintf("on this machine, only what the %s flush strategy had flushed; acknowledged messages are also fsynced on %d replica(s)", flushName, rp.WaitReplicas)})
	case rp.WaitReplicas > 0 && r.ReplicaAck == replication.AckReceived:
		rows = append(rows, DurabilityRow{"power loss", fmt.Sprintf("on this machine, only what the %s flush strategy had flushed; acknowledged messages are also on %d replica(s) unless they lose power at the same time", flushName, rp.WaitReplicas)})
	case rp.WaitReplicas > 0:
		rows = append(rows, DurabilityRow{"power loss", fmt.Sprintf("on this machine, only what the %s flush strategy had flushed; acknowledged messages are also on %d replica(s), which survive a power loss of theirs only if they fsynced them: %s", flushName, rp.WaitReplicas, notSaid)})
	default:
		rows = append(rows, DurabilityRow{"power loss", fmt.Sprintf("only what the %s flush strategy had flushed: acknowledged messages written since the last flush are lost", flushName)})
	}
	rows = append(rows, DurabilityRow{"loss of the master", lossOfMaster(role, r, replicated)})
	switch {
	case rp.VisibleAfterReplicated:
		rows = append(rows, DurabilityRow{"consumer visibility", "only replicated messages, so no consumer sees a message a failover loses"})
	case fp.VisibleAfterFlush:
		rows = append(rows, DurabilityRow{"consumer visibility", "only flushed messages"})
	case replicated && role != profile.RoleSlave:
		rows = append(rows, DurabilityRow{"consumer visibility", "every written message, replicated or not (the plugin does not hold consumers back to replicated data)"})
	default:
		rows = append(rows, DurabilityRow{"consumer visibility", "every written message"})
	}
	return rows
}

// lossOfMaster is the durability table's loss-of-the-master answer.
func lossOfMaster(role string, r Replication, replicated bool) string {
	switch {
	case role == profile.RoleSlave && r.Promotes:
		return "this node is a slave: it holds what the master streamed to it and can be promoted (keel admin promote)"
	case role == profile.RoleSlave:
		return "this node is a slave: it holds what the master streamed to it, but " + noPromote
	case !replicated:
		return "everything on this node is unavailable until its disk is recovered: there is no replica"
	case r.Policy.WaitReplicas > 0 && r.Promotes:
		return "no acknowledged message: promote an in-sync slave (keel admin promote); it holds every acknowledged message"
	case r.Policy.WaitReplicas > 0:
		return "every acknowledged message is on an in-sync slave, but " + noPromote + ": it must be made master by other means"
	case r.Promotes:
		return "acknowledged messages not yet replicated (the replication lag, exported as keel_replica_lag_bytes) are lost when a slave is promoted (keel admin promote)"
	default:
		return "acknowledged messages not yet replicated (the replication lag, exported as keel_replica_lag_bytes) are lost; and " + noPromote
	}
}

// Check loads a profile's plugins and validates their configuration
// without opening the store, and returns its durability table. It is
// read-only: nothing under store.dir (or anywhere else) is created or
// modified. Builtins that implement ConfigChecker validate without disk
// access; other plugins are configured against a scratch data dir in the
// system temporary directory, stopped, and the scratch dir removed.
// External plugin processes are started and killed again. Builtins are
// looked up in cat (nil: none).
func Check(ctx context.Context, p *profile.Profile, cat *Catalog) ([]DurabilityRow, error) {
	n := &Node{prof: p, catalog: cat, role: p.Replication.Role, peer: p.Replication.MasterAddr, checkOnly: true}
	if n.role == "" {
		n.role = profile.RoleMaster
	}
	n.log = discardLogger()
	n.metrics = newMetrics(n)
	defer func() {
		for _, lp := range n.plugins {
			if sv := supervisorOf(lp.p); sv != nil {
				sv.Stop(ctx) // kills the process
			} else if lp.scratch != "" {
				lp.p.Stop(ctx) // configured, never started: releases its files
			}
			if lp.scratch != "" {
				os.RemoveAll(lp.scratch)
			}
		}
	}()
	if !p.HasRole(profile.RoleBroker) {
		return nil, nil // a name server or controller alone loads no plugin and stores nothing
	}
	if err := n.loadPlugins(ctx); err != nil {
		return nil, err
	}
	rows := Durability(n.role, n.flushPolicy, declaredReplication(ctx, n.repl, n.replPolicy),
		profile.PluginName(p.Flush.Plugin, p.Flush.Path), profile.Chosen(p.Replication.Plugin, p.Replication.Path))
	if p.ClusterMode() {
		for i := range rows {
			if rows[i].Question == "loss of the master" {
				rows[i].Answer = clusterLossOfMaster(n.replPolicy)
			}
		}
	}
	return rows, nil
}

// clusterLossOfMaster is the loss-of-the-master answer in cluster mode:
// the controller elects, nobody promotes by hand.
func clusterLossOfMaster(rp sdk.ReplicationPolicy) string {
	what := "acknowledged messages not yet replicated (the replication lag) are lost"
	if rp.WaitReplicas > 0 {
		what = fmt.Sprintf("every acknowledged message is on %d replica(s) of the SyncStateSet and the controller elects the live member with the most data, so none is lost while one of those lives (with one replica per group, the only one)", rp.WaitReplicas)
	}
	return "the controller elects the SyncStateSet member with the most data (a crashed master is replaced 5/6 of controller.heartbeat_timeout after its last heartbeat, a silent one after the timeout) and the brokers switch roles themselves; " + what
}
