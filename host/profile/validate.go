package profile

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/keelmq/keel/host/schedule"
	"github.com/keelmq/keel/host/timer"
	"github.com/keelmq/keel/sdk/config"
)

var (
	pluginNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	hexRE        = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	hostnameRE   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
)

// validate checks every value and relation between values, section by
// section, and returns the problems sorted by position in the file.
func (p *Profile) validate() ErrorList {
	var errs ErrorList
	fail := func(key string, format string, args ...any) {
		path, _ := config.ParseKey(key)
		errs = append(errs, p.errorAt(path, fmt.Sprintf(format, args...)))
	}
	p.validateStore(fail)
	p.validatePlugins(fail)
	p.validateReplication(fail)
	p.validateRoles(fail)
	p.validateListeners(fail)
	p.validateServer(fail)
	p.validateController(fail)
	for _, pr := range p.ACL.Problems() {
		errs = append(errs, p.errorAt(append([]string{"acl"}, pr.Key...), pr.Msg))
	}
	errs.Sort()
	return errs
}

// failFunc reports a problem with the value of a dotted profile key.
type failFunc func(key string, format string, args ...any)

// validateStore checks the [store] section.
func (p *Profile) validateStore(fail failFunc) {
	st := &p.Store
	if st.Dir == "" {
		fail("store.dir", "must not be empty")
	}
	const minSegment, maxSegment = Size(64 << 10), Size(16 << 30)
	if st.SegmentSize < minSegment || st.SegmentSize > maxSegment {
		fail("store.segment_size", "%s is out of range (want %s to %s)", st.SegmentSize, minSegment, maxSegment)
	}
	switch {
	case st.MaxMessageSize <= 0:
		fail("store.max_message_size", "must be positive")
	case st.MaxMessageSize >= st.SegmentSize:
		if p.blame("store.max_message_size", "store.segment_size") == "store.segment_size" {
			fail("store.segment_size", "%s must be larger than store.max_message_size (%s)", st.SegmentSize, st.MaxMessageSize)
		} else {
			fail("store.max_message_size", "%s must be smaller than store.segment_size (%s)", st.MaxMessageSize, st.SegmentSize)
		}
	}
	if st.CQEntriesPerFile < 1 || st.CQEntriesPerFile > 50_000_000 {
		fail("store.cq_entries_per_file", "%d is out of range (want 1 to 50000000)", st.CQEntriesPerFile)
	}
	if rt := st.RecoveryTail; rt != 0 && (rt < 1<<20 || rt > 64<<30) {
		fail("store.recovery_tail", "%s is out of range (want 1MiB to 64GiB, or 0 for no bound)", rt)
	}
	if d := time.Duration(st.StallTimeout); d < time.Millisecond || d > time.Hour {
		fail("store.stall_timeout", "%s is out of range (want 1ms to 1h)", st.StallTimeout)
	}
	if msg := checkDeleteWhen(st.DeleteWhen); msg != "" {
		fail("store.delete_when", "%s", msg)
	}
	p.validateDiskRatios(fail)
	if st.DefaultQueues < 1 || st.DefaultQueues > 1024 {
		fail("store.default_queues", "%d is out of range (want 1 to 1024)", st.DefaultQueues)
	}
	if _, err := schedule.ParseLevels(st.MessageDelayLevel); err != nil {
		fail("store.message_delay_level", "%v", err)
	}
	if d := time.Duration(st.TransactionCheckInterval); d < 100*time.Millisecond || d > 24*time.Hour {
		fail("store.transaction_check_interval", "%s is out of range (want 100ms to 24h)", st.TransactionCheckInterval)
	}
	if d := time.Duration(st.TransactionTimeout); d < 100*time.Millisecond || d > 24*time.Hour {
		fail("store.transaction_timeout", "%s is out of range (want 100ms to 24h)", st.TransactionTimeout)
	}
	if st.TransactionCheckMax < 1 || st.TransactionCheckMax > 1000 {
		fail("store.transaction_check_max", "%d is out of range (want 1 to 1000)", st.TransactionCheckMax)
	}
	if perr, merr := timer.CheckSettings(time.Duration(st.TimerPrecision), time.Duration(st.TimerMaxDelay)); perr != nil {
		fail("store.timer_precision", "%v", perr)
	} else if merr != nil {
		fail("store.timer_max_delay", "%v", merr)
	}
}

// validateDiskRatios checks that each disk usage ratio is in (0, 1] and,
// when they all are, that they are ordered max_used <= clean_forcibly <=
// warning.
func (p *Profile) validateDiskRatios(fail failFunc) {
	st := &p.Store
	ratios := []struct {
		key string
		v   Ratio
	}{
		{"store.disk_max_used_ratio", st.DiskMaxUsedRatio},
		{"store.disk_clean_forcibly_ratio", st.DiskCleanForciblyRatio},
		{"store.disk_warning_ratio", st.DiskWarningRatio},
	}
	ratiosOK := true
	for _, r := range ratios {
		if !(r.v > 0 && r.v <= 1) {
			fail(r.key, "%g is out of range (want more than 0 and at most 1)", float64(r.v))
			ratiosOK = false
		}
	}
	if ratiosOK {
		for i := 0; i+1 < len(ratios); i++ {
			lo, hi := ratios[i], ratios[i+1]
			if lo.v > hi.v {
				fail(p.blame(lo.key, hi.key), "ratios must be ordered disk_max_used_ratio <= disk_clean_forcibly_ratio <= disk_warning_ratio, but %s = %g > %s = %g",
					strings.TrimPrefix(lo.key, "store."), float64(lo.v), strings.TrimPrefix(hi.key, "store."), float64(hi.v))
			}
		}
	}
}

// validatePlugins checks each plugin section's choice of plugin.
func (p *Profile) validatePlugins(fail failFunc) {
	p.validatePlugin(SectionFlush, p.Flush.Plugin, p.Flush.Path, p.Flush.SHA256, p.Flush.Config, fail)
	p.validatePlugin(SectionIndex, p.Index.Plugin, p.Index.Path, p.Index.SHA256, p.Index.Config, fail)
	r := &p.Replication
	p.validatePlugin(SectionReplication, r.Plugin, r.Path, r.SHA256, r.Config, fail)
}

// validateReplication checks the HA role and what it requires, and warns
// about an unauthenticated HA link.
func (p *Profile) validateReplication(fail failFunc) {
	r := &p.Replication
	switch r.Role {
	case RoleMaster:
		if r.MasterAddr != "" {
			fail("replication.master_addr", `only a slave sets master_addr (role is "master")`)
		}
	case RoleSlave:
		if r.MasterAddr == "" {
			fail("replication.role", `a slave needs replication.master_addr, the master's HA address (host:port)`)
		} else if msg := checkAddr(r.MasterAddr, false); msg != "" {
			fail("replication.master_addr", "%s", msg)
		}
		if r.Plugin == PluginNone {
			fail("replication.role", `a slave needs a replication plugin to receive the master's log, but replication.plugin is "none"`)
		}
	default:
		fail("replication.role", `invalid role %q (want "master" or "slave")`, r.Role)
	}
	if Chosen(r.Plugin, r.Path) && r.Secret == "" {
		p.Warnings = append(p.Warnings, "replication.secret is empty: HA connections are not authenticated")
	}
}

// validateListeners checks every listen address, and that no two of them
// collide.
func (p *Profile) validateListeners(fail failFunc) {
	sv, c := &p.Server, &p.Controller
	type listener struct{ key, addr string }
	var listeners []listener
	if p.HasRole(RoleNamesrv) {
		listeners = append(listeners, listener{"server.namesrv_addr", sv.NamesrvAddr})
	}
	if p.HasRole(RoleBroker) {
		listeners = append(listeners, listener{"server.broker_addr", sv.BrokerAddr}, listener{"server.ha_addr", sv.HAAddr})
	}
	if p.HasRole(RoleController) {
		listeners = append(listeners, listener{"controller.addr", c.Addr}, listener{"controller.raft_addr", c.RaftAddr})
	}
	listeners = append(listeners, listener{"admin.addr", p.Admin.Addr})
	for i, l := range listeners {
		if msg := checkAddr(l.addr, true); msg != "" {
			fail(l.key, "%s", msg)
			continue
		}
		for _, prev := range listeners[:i] {
			if sameListener(prev.addr, l.addr) {
				fail(l.key, "%s is already used by %s", l.addr, prev.key)
			}
		}
	}
}

// validateServer checks the [server] section's identity and limits, and
// their relations with the HA role and the store's message size.
func (p *Profile) validateServer(fail failFunc) {
	st, r, sv := &p.Store, &p.Replication, &p.Server
	if sv.BrokerName == "" || strings.ContainsAny(sv.BrokerName, " \t\r\n") {
		fail("server.broker_name", "%q must be non-empty, without spaces", sv.BrokerName)
	}
	if sv.Cluster == "" || strings.ContainsAny(sv.Cluster, " \t\r\n") {
		fail("server.cluster", "%q must be non-empty, without spaces", sv.Cluster)
	}
	switch {
	case r.Role == RoleMaster && sv.BrokerID != 0:
		fail("server.broker_id", "a master has broker_id 0, not %d", sv.BrokerID)
	case r.Role == RoleSlave && sv.BrokerID < 1:
		fail("server.broker_id", "a slave has broker_id 1 or more, not %d", sv.BrokerID)
	}
	if sv.MaxConnections < 1 {
		fail("server.max_connections", "%d is out of range (want at least 1)", sv.MaxConnections)
	}
	switch {
	case sv.MaxFrameSize > math.MaxInt32:
		fail("server.max_frame_size", "%s is too large (a frame length is 32-bit: at most %d bytes)", sv.MaxFrameSize, math.MaxInt32)
	case sv.MaxFrameSize <= st.MaxMessageSize:
		if p.blame("server.max_frame_size", "store.max_message_size") == "store.max_message_size" {
			fail("store.max_message_size", "%s must be smaller than server.max_frame_size (%s)", st.MaxMessageSize, sv.MaxFrameSize)
		} else {
			fail("server.max_frame_size", "%s must be larger than store.max_message_size (%s)", sv.MaxFrameSize, st.MaxMessageSize)
		}
	}
	if sv.RequestBufferBudget < sv.MaxFrameSize {
		if p.blame("server.request_buffer_budget", "server.max_frame_size") == "server.max_frame_size" {
			fail("server.max_frame_size", "%s must not exceed server.request_buffer_budget (%s): a frame larger than the budget could never be read", sv.MaxFrameSize, sv.RequestBufferBudget)
		} else {
			fail("server.request_buffer_budget", "%s is smaller than server.max_frame_size (%s): a frame larger than the budget could never be read", sv.RequestBufferBudget, sv.MaxFrameSize)
		}
	}
	if sv.SlaveBrokerAddr != "" {
		fail("server.slave_broker_addr", "is no longer used: a slave registers itself with the name servers, at its own broker id and read-only; list the master's name server in the slave's server.namesrv_addrs and the slave's in the master's instead")
	}
}

// validatePlugin checks a plugin section's choice of plugin, and that a
// section choosing none (PluginNone) has no config table: no plugin would
// read it, so its keys would be silently ignored.
func (p *Profile) validatePlugin(section, plugin, path, sum string, cfg map[string]any, fail failFunc) {
	if plugin == PluginNone && path == "" && len(cfg) > 0 {
		fail(section+".config", `is set, but %s.plugin is %q, so no plugin reads it: choose a plugin or remove the table`, section, PluginNone)
	}
	switch {
	case plugin != "" && path != "":
		fail(section+".path", "set either plugin (a builtin) or path (an external binary), not both (plugin is %q)", plugin)
	case plugin == "" && path == "":
		fail(section+".plugin", `missing plugin: set plugin = "<builtin name>" or path = "<external binary>"`)
	case plugin != "" && !pluginNameRE.MatchString(plugin):
		fail(section+".plugin", "invalid plugin name %q (want lower-case letters, digits, '.', '_', '-')", plugin)
	}
	if sum != "" {
		switch {
		case path == "":
			fail(section+".sha256", "sha256 pins an external binary; set path too")
		case !hexRE.MatchString(sum):
			fail(section+".sha256", "invalid sha256 %q (want 64 hex digits)", sum)
		}
	}
}
