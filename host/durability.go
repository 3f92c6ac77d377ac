package host

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/sdk"
)

// DurabilityRow is one line of a profile's durability table.
type DurabilityRow struct {
	Question string
	Answer   string
}

// Durability answers, for the policies a profile's plugins declared: when
// the producer's ack is sent, and what survives a process crash, a power
// loss and the loss of the master. role is replication.role; flushName
// names the flush plugin (profile.PluginName); replicated says whether the
// [replication] section selects a plugin (profile.Chosen). The benchmark
// measures these claims (recovery workload: acked messages lost per crash
// kind).
func Durability(role string, fp sdk.FlushPolicy, rp sdk.ReplicationPolicy, flushName string, replicated bool) []DurabilityRow {
	var ack []string
	if fp.WaitFlush {
		ack = append(ack, fmt.Sprintf("after fdatasync on this machine (FLUSH_DISK_TIMEOUT after %s, message kept)", fp.Timeout))
	}
	if rp.WaitReplicas > 0 {
		ack = append(ack, fmt.Sprintf("after %d replica(s) acknowledged it (FLUSH_SLAVE_TIMEOUT after %s; SLAVE_NOT_AVAILABLE at once with fewer in sync)", rp.WaitReplicas, rp.Timeout))
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
	case rp.WaitReplicas > 0:
		rows = append(rows, DurabilityRow{"power loss", fmt.Sprintf("on this machine, only what the %s flush strategy had flushed; acknowledged messages are also on %d replica(s) unless they lose power at the same time", flushName, rp.WaitReplicas)})
	default:
		rows = append(rows, DurabilityRow{"power loss", fmt.Sprintf("only what the %s flush strategy had flushed: acknowledged messages written since the last flush are lost", flushName)})
	}
	switch {
	case role == profile.RoleSlave:
		rows = append(rows, DurabilityRow{"loss of the master", "this node is a slave: it holds what the master streamed to it and can be promoted (keel admin promote)"})
	case !replicated:
		rows = append(rows, DurabilityRow{"loss of the master", "everything on this node is unavailable until its disk is recovered: there is no replica"})
	case rp.WaitReplicas > 0:
		rows = append(rows, DurabilityRow{"loss of the master", "no acknowledged message: promote an in-sync slave (keel admin promote); it holds every acknowledged message"})
	default:
		rows = append(rows, DurabilityRow{"loss of the master", "acknowledged messages not yet replicated (the replication lag, exported as keel_replica_lag_bytes) are lost when a slave is promoted"})
	}
	if rp.VisibleAfterReplicated {
		rows = append(rows, DurabilityRow{"consumer visibility", "only replicated messages, so no consumer sees a message a failover loses"})
	} else if fp.VisibleAfterFlush {
		rows = append(rows, DurabilityRow{"consumer visibility", "only flushed messages"})
	} else {
		rows = append(rows, DurabilityRow{"consumer visibility", "every written message"})
	}
	return rows
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
	n := &Node{prof: p, catalog: cat, role: p.Replication.Role, checkOnly: true}
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
	if err := n.loadPlugins(ctx); err != nil {
		return nil, err
	}
	return Durability(n.role, n.flushPolicy, n.replPolicy, profile.PluginName(p.Flush.Plugin, p.Flush.Path), profile.Chosen(p.Replication.Plugin, p.Replication.Path)), nil
}
