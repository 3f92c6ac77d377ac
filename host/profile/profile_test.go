package profile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustLoad(t *testing.T, doc string, overrides ...string) *Profile {
	t.Helper()
	p, err := LoadBytes("profiles/x.toml", []byte(doc), overrides)
	if err != nil {
		t.Fatalf("LoadBytes: %v", err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	p := mustLoad(t, "schema = 1\n")
	want := document{
		Schema: 1,
		Store: StoreConfig{
			Dir:                    filepath.Join("data", "x"),
			SegmentSize:            1 << 30,
			MaxMessageSize:         4 << 20,
			CQEntriesPerFile:       300000,
			FileReservedTime:       Duration(72 * time.Hour),
			DeleteWhen:             "04",
			DiskMaxUsedRatio:       0.75,
			DiskCleanForciblyRatio: 0.85,
			DiskWarningRatio:       0.90,
			ReadCache:              0,
			CheckCRCOnRecover:      true,
			RecoveryTail:           256 << 20,
			StallTimeout:           Duration(5 * time.Second),
			AutoCreateTopics:       true,
			EnablePropertyFilter:   true,
			DefaultQueues:          4,
			MessageDelayLevel:      "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
			TimerEnable:            true,
			TimerMaxDelay:          Duration(72 * time.Hour),
			TimerPrecision:         Duration(time.Second),

			// Transactions (host/txn).
			TransactionCheckInterval: Duration(30 * time.Second),
			TransactionTimeout:       Duration(6 * time.Second),
			TransactionCheckMax:      15,
		},
		Flush:       PluginSection{Plugin: "async"},
		Replication: ReplicationSection{Plugin: "none", Role: "master"},
		Index:       PluginSection{Plugin: "hash"},
		Server: ServerConfig{
			NamesrvAddr:    "127.0.0.1:9876",
			BrokerAddr:     "127.0.0.1:10911",
			HAAddr:         "127.0.0.1:10912",
			BrokerName:     "broker-a",
			Cluster:        "DefaultCluster",
			BrokerID:       0,
			MaxConnections: 4096,
			MaxFrameSize:   16 << 20,
			IdleTimeout:    Duration(120 * time.Second),

			RequestBufferBudget: 256 << 20,
			Roles:               []string{"namesrv", "broker"},
			RegisterInterval:    Duration(30 * time.Second),
		},
		Controller: ControllerConfig{
			Addr: "127.0.0.1:9878", RaftAddr: "127.0.0.1:9880", NodeID: "c0",
			Peers: []string{"c0=127.0.0.1:9880"}, Dir: filepath.Join("data", "x", "controller"),
			HeartbeatTimeout: Duration(3 * time.Second),
		},
		Admin: AdminConfig{Addr: "127.0.0.1:10914"},
	}
	if got := docOf(p); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if p.Name != "x" || p.File != "profiles/x.toml" || p.Dir != "profiles" {
		t.Errorf("name/file/dir = %q %q %q", p.Name, p.File, p.Dir)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("warnings = %v", p.Warnings)
	}
	if got := p.Store.DeleteHours(); !reflect.DeepEqual(got, []int{4}) {
		t.Errorf("DeleteHours = %v", got)
	}
}

func docOf(p *Profile) document {
	return document{Schema: p.Schema, Store: p.Store, Flush: p.Flush, Replication: p.Replication, Index: p.Index, Server: p.Server, Controller: p.Controller, Admin: p.Admin}
}

func TestDependentDefaults(t *testing.T) {
	// A slave defaults to broker_id 1; an explicit broker_id is kept.
	p := mustLoad(t, `schema = 1
[replication]
plugin = "async"
role = "slave"
master_addr = "127.0.0.1:10912"
secret = "s"
[server]
broker_addr = "127.0.0.1:20911"
ha_addr = "127.0.0.1:20912"
`)
	if p.Server.BrokerID != 1 {
		t.Errorf("slave broker_id = %d, want 1", p.Server.BrokerID)
	}
	p = mustLoad(t, "schema = 1\n[replication]\nplugin = \"async\"\nrole = \"slave\"\nmaster_addr = \"10.0.0.1:10912\"\n[server]\nbroker_id = 3\n")
	if p.Server.BrokerID != 3 {
		t.Errorf("slave broker_id = %d, want 3", p.Server.BrokerID)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "secret") {
		t.Errorf("warnings = %v, want one about the secret", p.Warnings)
	}
	// A path without plugin clears the default builtin name.
	p = mustLoad(t, "schema = 1\n[flush]\npath = \"bin/flush\"\nsha256 = \""+strings.Repeat("ab", 32)+"\"\n")
	if p.Flush.Plugin != "" || p.Flush.Path != "bin/flush" {
		t.Errorf("flush = %+v", p.Flush)
	}
	if got, want := p.ResolvePath(p.Flush.Path), filepath.Join("profiles", "bin", "flush"); got != want {
		t.Errorf("ResolvePath = %q, want %q", got, want)
	}
	if got := p.ResolvePath("/abs/bin"); got != "/abs/bin" {
		t.Errorf("ResolvePath(abs) = %q", got)
	}
	// An empty config table is normalised to nil.
	p = mustLoad(t, "schema = 1\n[index.config]\n")
	if p.Index.Config != nil {
		t.Errorf("index config = %#v, want nil", p.Index.Config)
	}
}

func TestValuesParsed(t *testing.T) {
	p := mustLoad(t, `schema = 1
[store]
dir = "/var/keel"
segment_size = "64MiB"
max_message_size = 1048576
cq_entries_per_file = 1000
file_reserved_time = "48h"
delete_when = "04;16"
disk_max_used_ratio = "70%"
disk_clean_forcibly_ratio = 0.8
disk_warning_ratio = 1
read_cache = "1.5GiB"
check_crc_on_recover = false
auto_create_topics = false
default_queues = 8
[flush]
plugin = "sync"
[flush.config]
timeout = "5s"
[server]
max_frame_size = "32MB"
idle_timeout = "0s"
namesrv_addrs = ["127.0.0.1:20876"]
`)
	st := p.Store
	if st.Dir != "/var/keel" || st.SegmentSize != 64<<20 || st.MaxMessageSize != 1<<20 || st.CQEntriesPerFile != 1000 ||
		st.FileReservedTime.D() != 48*time.Hour || st.DiskMaxUsedRatio != 0.70 || st.DiskCleanForciblyRatio != 0.8 ||
		st.DiskWarningRatio != 1 || st.ReadCache != 1536<<20 || st.CheckCRCOnRecover || st.AutoCreateTopics || st.DefaultQueues != 8 {
		t.Errorf("store = %+v", st)
	}
	if got := st.DeleteHours(); !reflect.DeepEqual(got, []int{4, 16}) {
		t.Errorf("DeleteHours = %v", got)
	}
	if p.Flush.Plugin != "sync" || !reflect.DeepEqual(p.Flush.Config, map[string]any{"timeout": "5s"}) {
		t.Errorf("flush = %+v", p.Flush)
	}
	if p.Server.MaxFrameSize != 32e6 || p.Server.IdleTimeout != 0 || !reflect.DeepEqual(p.Server.NamesrvAddrs, []string{"127.0.0.1:20876"}) {
		t.Errorf("server = %+v", p.Server)
	}
}

// TestErrors checks every kind of error with its exact text: position, key
// and what is allowed.
func TestErrors(t *testing.T) {
	storeKeys := "dir, segment_size, max_message_size, cq_entries_per_file, file_reserved_time, delete_when, disk_max_used_ratio, disk_clean_forcibly_ratio, disk_warning_ratio, read_cache, check_crc_on_recover, recovery_tail, stall_timeout, auto_create_topics, enable_property_filter, default_queues, message_delay_level, transaction_check_interval, transaction_timeout, transaction_check_max, timer_enable, timer_max_delay, timer_precision"
	tests := []struct {
		name      string
		doc       string
		overrides []string
		want      string
	}{
		{"missing schema", "[store]\ndir = \"d\"\n", nil,
			"profiles/x.toml: schema: missing schema version: add `schema = 1` at the top of the profile"},
		{"schema too new", "schema = 2\n", nil,
			"profiles/x.toml:1:10: schema: unsupported schema version 2: this keel reads schema = 1"},
		{"schema wrong type", "schema = \"1\"\n", nil,
			"profiles/x.toml:1:10: schema: want the integer 1, got a string"},
		{"schema in a table", "[x]\nschema = 1\n", nil,
			"profiles/x.toml: schema: missing schema version: add `schema = 1` at the top of the profile"},
		{"syntax error", "schema = 1\n[store\n", nil,
			"profiles/x.toml:2:7: syntax error: expected ']' to close table name"},
		{"unknown key at top level", "schema = 1\nstroe = 1\n", nil,
			`profiles/x.toml:2:1: stroe: unknown key (did you mean "store"?); allowed at top level: schema, store, flush, replication, index, server, controller, admin, acl`},
		{"unknown key in a section", "schema = 1\n[store]\nsegment_sise = \"1GiB\"\n", nil,
			`profiles/x.toml:3:1: store.segment_sise: unknown key (did you mean "segment_size"?); allowed in [store]: ` + storeKeys},
		{"unknown key, dotted", "schema = 1\nadmin.port = 1\n", nil,
			`profiles/x.toml:2:7: admin.port: unknown key; allowed in [admin]: addr`},
		{"two unknown keys", "schema = 1\n[admin]\nx = 1\ny = 2\n", nil,
			"profiles/x.toml:3:1: admin.x: unknown key; allowed in [admin]: addr\nprofiles/x.toml:4:1: admin.y: unknown key; allowed in [admin]: addr"},
		{"key case differs", "schema = 1\n[Store]\n", nil,
			`profiles/x.toml:2:2: Store: unknown key (did you mean "store"?); allowed at top level: schema, store, flush, replication, index, server, controller, admin, acl (keys are case-sensitive)`},
		{"key below a duration", "schema = 1\n[store]\nfile_reserved_time.hours = \"72h\"\n", nil,
			`profiles/x.toml:3:20: store.file_reserved_time.hours: unknown key: store.file_reserved_time is a duration string (e.g. "500ms", "2s"), not a table`},
		{"recovery tail too small", "schema = 1\n[store]\nrecovery_tail = \"64KiB\"\n", nil,
			"profiles/x.toml:3:17: store.recovery_tail: 64KiB is out of range (want 1MiB to 64GiB, or 0 for no bound)"},
		{"stall timeout too short", "schema = 1\n[store]\nstall_timeout = \"0s\"\n", nil,
			"profiles/x.toml:3:17: store.stall_timeout: 0s is out of range (want 1ms to 1h)"},
		{"wrong type: string for integer", "schema = 1\n[store]\ndefault_queues = \"4\"\n", nil,
			"profiles/x.toml:3:18: store.default_queues: want an integer, got a string"},
		{"wrong type: integer for string", "schema = 1\n[server]\nbroker_name = 7\n", nil,
			"profiles/x.toml:3:15: server.broker_name: want a string, got an integer"},
		{"wrong type: bool", "schema = 1\n[store]\nauto_create_topics = \"yes\"\n", nil,
			"profiles/x.toml:3:22: store.auto_create_topics: want a boolean (true or false), got a string"},
		{"wrong type: table", "schema = 1\nstore = 3\n", nil,
			"profiles/x.toml:2:9: store: want a table, got an integer"},
		{"wrong type: plugin config", "schema = 1\n[flush]\nconfig = \"fast\"\n", nil,
			"profiles/x.toml:3:10: flush.config: want a table, got a string"},
		{"duplicate key", "schema = 1\n[server]\ncluster = \"a\"\ncluster = \"b\"\n", nil,
			"profiles/x.toml:4:1: server.cluster: key cluster is already defined"},
		{"integer overflow", "schema = 1\n[store]\ndefault_queues = 99999999999999999999\n", nil,
			"profiles/x.toml:3:18: store.default_queues: decimal number is too large to fit in a 64-bit signed integer"},
		{"invalid duration", "schema = 1\n[server]\nidle_timeout = \"5 parsecs\"\n", nil,
			`profiles/x.toml:3:16: server.idle_timeout: invalid duration "5 parsecs" (want e.g. "500ms", "2s")`},
		{"duration as bare number", "schema = 1\n[server]\nidle_timeout = 120\n", nil,
			`profiles/x.toml:3:16: server.idle_timeout: invalid duration 120: a bare number has no unit (want e.g. "500ms", "2s"; quote it)`},
		{"duration string without unit", "schema = 1\n[server]\nidle_timeout = \"120\"\n", nil,
			`profiles/x.toml:3:16: server.idle_timeout: invalid duration "120": a bare number has no unit (want e.g. "500ms", "2s")`},
		{"duration in days", "schema = 1\n[store]\nfile_reserved_time = \"3d\"\n", nil,
			`profiles/x.toml:3:22: store.file_reserved_time: invalid duration "3d": there is no day unit (use hours, e.g. "72h")`},
		{"negative duration", "schema = 1\n[store]\nfile_reserved_time = \"-1h\"\n", nil,
			`profiles/x.toml:3:22: store.file_reserved_time: invalid duration "-1h": must not be negative`},
		{"duration as table", "schema = 1\n[server.idle_timeout]\n", nil,
			`profiles/x.toml:2:2: server.idle_timeout: invalid duration: got a table (want e.g. "500ms", "2s")`},
		{"invalid size unit", "schema = 1\n[store]\nsegment_size = \"1 parsec\"\n", nil,
			`profiles/x.toml:3:16: store.segment_size: invalid size "1 parsec": unknown unit "parsec" (want B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB = powers of 1000)`},
		{"size as float", "schema = 1\n[store]\nsegment_size = 1.5\n", nil,
			`profiles/x.toml:3:16: store.segment_size: invalid size 1.5: a byte count is a whole number (want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes)`},
		{"negative size", "schema = 1\n[store]\nread_cache = -1\n", nil,
			`profiles/x.toml:3:14: store.read_cache: invalid size -1: must not be negative`},
		{"fractional bytes", "schema = 1\n[store]\nread_cache = \"1.5B\"\n", nil,
			`profiles/x.toml:3:14: store.read_cache: invalid size "1.5B": not a whole number of bytes`},
		{"size in an inline table", "schema = 1\nstore = { segment_size = \"1x\" }\n", nil,
			`profiles/x.toml:2:26: store.segment_size: invalid size "1x": unknown unit "x" (want B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB = powers of 1000)`},
		{"ratio out of range", "schema = 1\n[store]\ndisk_warning_ratio = 1.5\n", nil,
			`profiles/x.toml:3:22: store.disk_warning_ratio: invalid ratio 1.5: out of range (want a number between 0 and 1 such as 0.75, or a percentage such as "75%")`},
		{"ratio percent out of range", "schema = 1\n[store]\ndisk_warning_ratio = \"150%\"\n", nil,
			`profiles/x.toml:3:22: store.disk_warning_ratio: invalid ratio "150%": out of range (want a number between 0 and 1 such as 0.75, or a percentage such as "75%")`},
		{"ratio not a number", "schema = 1\n[store]\ndisk_warning_ratio = \"most\"\n", nil,
			`profiles/x.toml:3:22: store.disk_warning_ratio: invalid ratio "most" (want a number between 0 and 1 such as 0.75, or a percentage such as "75%")`},
		{"ratio nan", "schema = 1\n[store]\ndisk_warning_ratio = nan\n", nil,
			`profiles/x.toml:3:22: store.disk_warning_ratio: invalid ratio nan (want a number between 0 and 1 such as 0.75, or a percentage such as "75%")`},
		{"ratio zero", "schema = 1\n[store]\ndisk_max_used_ratio = 0\n", nil,
			`profiles/x.toml:3:23: store.disk_max_used_ratio: 0 is out of range (want more than 0 and at most 1)`},
		{"ratio ordering", "schema = 1\n[store]\ndisk_max_used_ratio = 0.95\n", nil,
			`profiles/x.toml:3:23: store.disk_max_used_ratio: ratios must be ordered disk_max_used_ratio <= disk_clean_forcibly_ratio <= disk_warning_ratio, but disk_max_used_ratio = 0.95 > disk_clean_forcibly_ratio = 0.85`},
		{"ratio ordering, later key", "schema = 1\n[store]\ndisk_max_used_ratio = 0.5\ndisk_clean_forcibly_ratio = \"40%\"\n", nil,
			`profiles/x.toml:4:29: store.disk_clean_forcibly_ratio: ratios must be ordered disk_max_used_ratio <= disk_clean_forcibly_ratio <= disk_warning_ratio, but disk_max_used_ratio = 0.5 > disk_clean_forcibly_ratio = 0.4`},
		{"invalid address", "schema = 1\n[server]\nbroker_addr = \"localhost\"\n", nil,
			`profiles/x.toml:3:15: server.broker_addr: invalid address "localhost": not host:port (want host:port, e.g. "127.0.0.1:10911"; port 0 picks a free port)`},
		{"invalid port", "schema = 1\n[admin]\naddr = \"127.0.0.1:99999\"\n", nil,
			`profiles/x.toml:3:8: admin.addr: invalid address "127.0.0.1:99999": invalid port "99999" (want host:port, e.g. "127.0.0.1:10911"; port 0 picks a free port)`},
		{"invalid host", "schema = 1\n[admin]\naddr = \"a b:1\"\n", nil,
			`profiles/x.toml:3:8: admin.addr: invalid address "a b:1": invalid host "a b" (want host:port, e.g. "127.0.0.1:10911"; port 0 picks a free port)`},
		{"listener clash", "schema = 1\n[server]\nha_addr = \"0.0.0.0:10911\"\n", nil,
			`profiles/x.toml:3:11: server.ha_addr: 0.0.0.0:10911 is already used by server.broker_addr`},
		{"slave without master_addr", "schema = 1\n[replication]\nplugin = \"async\"\nrole = \"slave\"\n", nil,
			`profiles/x.toml:4:8: replication.role: a slave needs replication.master_addr, the master's HA address (host:port)`},
		{"slave without plugin", "schema = 1\n[replication]\nrole = \"slave\"\nmaster_addr = \"127.0.0.1:10912\"\n", nil,
			`profiles/x.toml:3:8: replication.role: a slave needs a replication plugin to receive the master's log, but replication.plugin is "none"`},
		{"master with master_addr", "schema = 1\n[replication]\nmaster_addr = \"127.0.0.1:10912\"\n", nil,
			`profiles/x.toml:3:15: replication.master_addr: only a slave sets master_addr (role is "master")`},
		{"master_addr port 0", "schema = 1\n[replication]\nplugin = \"async\"\nrole = \"slave\"\nmaster_addr = \"127.0.0.1:0\"\n", nil,
			`profiles/x.toml:5:15: replication.master_addr: invalid address "127.0.0.1:0": port 0 cannot be dialled (want host:port with a non-zero port, e.g. "127.0.0.1:10911")`},
		{"invalid role", "schema = 1\n[replication]\nrole = \"leader\"\n", nil,
			`profiles/x.toml:3:8: replication.role: invalid role "leader" (want "master" or "slave")`},
		{"master broker_id", "schema = 1\n[server]\nbroker_id = 1\n", nil,
			`profiles/x.toml:3:13: server.broker_id: a master has broker_id 0, not 1`},
		{"plugin and path", "schema = 1\n[index]\nplugin = \"hash\"\npath = \"bin/idx\"\n", nil,
			`profiles/x.toml:4:8: index.path: set either plugin (a builtin) or path (an external binary), not both (plugin is "hash")`},
		{"empty plugin", "schema = 1\n[flush]\nplugin = \"\"\n", nil,
			`profiles/x.toml:3:10: flush.plugin: missing plugin: set plugin = "<builtin name>" or path = "<external binary>"`},
		{"bad plugin name", "schema = 1\n[flush]\nplugin = \"Sync!\"\n", nil,
			`profiles/x.toml:3:10: flush.plugin: invalid plugin name "Sync!" (want lower-case letters, digits, '.', '_', '-')`},
		{"sha256 without path", "schema = 1\n[flush]\nsha256 = \"" + strings.Repeat("0", 64) + "\"\n", nil,
			`profiles/x.toml:3:10: flush.sha256: sha256 pins an external binary; set path too`},
		{"bad sha256", "schema = 1\n[flush]\npath = \"p\"\nsha256 = \"abc\"\n", nil,
			`profiles/x.toml:4:10: flush.sha256: invalid sha256 "abc" (want 64 hex digits)`},
		{"segment too small", "schema = 1\n[store]\nsegment_size = \"4KiB\"\nmax_message_size = \"1KiB\"\n", nil,
			`profiles/x.toml:3:16: store.segment_size: 4KiB is out of range (want 64KiB to 16GiB)`},
		{"message not smaller than segment", "schema = 1\n[store]\nsegment_size = \"64MiB\"\nmax_message_size = \"64MiB\"\n[server]\nmax_frame_size = \"1GiB\"\n", nil,
			`profiles/x.toml:4:20: store.max_message_size: 64MiB must be smaller than store.segment_size (64MiB)`},
		{"frame not larger than message", "schema = 1\n[server]\nmax_frame_size = \"4MiB\"\n", nil,
			`profiles/x.toml:3:18: server.max_frame_size: 4MiB must be larger than store.max_message_size (4MiB)`},
		{"delete_when", "schema = 1\n[store]\ndelete_when = \"04;25\"\n", nil,
			`profiles/x.toml:3:15: store.delete_when: invalid hour "25" in "04;25" (want hours 00-23 separated by ';', e.g. "04;16")`},
		{"default_queues", "schema = 1\n[store]\ndefault_queues = 0\n", nil,
			`profiles/x.toml:3:18: store.default_queues: 0 is out of range (want 1 to 1024)`},
		{"message_delay_level unit", "schema = 1\n[store]\nmessage_delay_level = \"1s 5s 10x\"\n", nil,
			`profiles/x.toml:3:23: store.message_delay_level: delay level 3 "10x": the unit must be s, m, h or d (as in "10s")`},
		{"message_delay_level number", "schema = 1\n[store]\nmessage_delay_level = \"1s 0m\"\n", nil,
			`profiles/x.toml:3:23: store.message_delay_level: delay level 2 "0m": want a positive whole number before the unit (as in "10s")`},
		{"transaction_check_interval range", "schema = 1\n[store]\ntransaction_check_interval = \"10ms\"\n", nil,
			`profiles/x.toml:3:30: store.transaction_check_interval: 10ms is out of range (want 100ms to 24h)`},
		{"transaction_check_max range", "schema = 1\n[store]\ntransaction_check_max = 0\n", nil,
			`profiles/x.toml:3:25: store.transaction_check_max: 0 is out of range (want 1 to 1000)`},
		{"message_delay_level empty", "schema = 1\n[store]\nmessage_delay_level = \" \"\n", nil,
			`profiles/x.toml:3:23: store.message_delay_level: no delay levels (want entries such as "1s 5s 10s")`},
		{"several validation errors", "schema = 1\n[server]\nmax_connections = 0\ncluster = \"\"\n", nil,
			"profiles/x.toml:3:19: server.max_connections: 0 is out of range (want at least 1)\nprofiles/x.toml:4:11: server.cluster: \"\" must be non-empty, without spaces"},

		// Overrides: the error names the --set argument.
		{"override unknown key", "schema = 1\n", []string{"store.bogus=1"},
			"profiles/x.toml: --set store.bogus=1: store.bogus: unknown key; allowed in [store]: " + storeKeys},
		{"override invalid value", "schema = 1\n", []string{"store.segment_size=1parsec"},
			`profiles/x.toml: --set store.segment_size=1parsec: store.segment_size: invalid size "1parsec": unknown unit "parsec" (want B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB = powers of 1000)`},
		{"override wrong type", "schema = 1\n", []string{"server.cluster=true"},
			`profiles/x.toml: --set server.cluster=true: server.cluster: want a string, got a boolean (quote the value to pass a string)`},
		{"override fails validation", "schema = 1\n[store]\nmax_message_size = \"1MiB\"\n", []string{"store.segment_size=1MiB"},
			`profiles/x.toml: --set store.segment_size=1MiB: store.segment_size: 1MiB must be larger than store.max_message_size (1MiB)`},
		{"relation blames the key the user set", "schema = 1\n[server]\nmax_frame_size = \"8MiB\"\n[store]\nmax_message_size = \"8MiB\"\n", nil,
			`profiles/x.toml:5:20: store.max_message_size: 8MiB must be smaller than server.max_frame_size (8MiB)`},
		{"override without =", "schema = 1\n", []string{"store.segment_size"},
			`profiles/x.toml: --set store.segment_size: want key=value, e.g. store.segment_size=64MiB`},
		{"override bad key", "schema = 1\n", []string{"store..x=1"},
			`profiles/x.toml: --set store..x=1: invalid key "store..x": want a dotted key such as store.segment_size`},
		{"override to empty", "schema = 1\n", []string{"store.dir="},
			`profiles/x.toml: --set store.dir=: store.dir: must not be empty`},
		{"override schema", "schema = 1\n", []string{"schema=2"},
			`profiles/x.toml: --set schema=2: schema: the schema version cannot be overridden`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LoadBytes("profiles/x.toml", []byte(tt.doc), tt.overrides)
			if err == nil {
				t.Fatalf("loaded %+v, want error %q", docOf(p), tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not an *Error", err)
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	_, err := LoadBytes("a/b.toml", []byte("schema = 1\n[server]\nidle_timeout = \"soon\"\n"), nil)
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
	want := Error{File: "a/b.toml", Line: 3, Col: 16, Key: "server.idle_timeout", Msg: `invalid duration "soon" (want e.g. "500ms", "2s")`}
	if *pe != want {
		t.Errorf("got %+v\nwant %+v", *pe, want)
	}
	_, err = LoadBytes("a/b.toml", []byte("schema = 1\n[admin]\nx = 1\ny = 2\n"), nil)
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 || list[0].Key != "admin.x" || list[1].Key != "admin.y" {
		t.Errorf("err = %#v, want an ErrorList of two", err)
	}
	_, err = LoadBytes("a/b.toml", []byte("schema = 1\n"), []string{"admin.addr=x"})
	if !errors.As(err, &pe) || pe.Override != "admin.addr=x" || pe.Line != 0 || pe.Key != "admin.addr" {
		t.Errorf("override error = %+v", pe)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "edge.toml")
	if _, err := Load(path, nil); err == nil || !strings.Contains(err.Error(), "loading profile") {
		t.Errorf("missing file: err = %v", err)
	}
	writeFile(t, path, "schema = 1\n[flush]\npath = \"plugins/f\"\n")
	p, err := Load(path, []string{"server.broker_name=broker-b"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "edge" || p.Dir != dir || p.Store.Dir != filepath.Join("data", "edge") || p.Server.BrokerName != "broker-b" {
		t.Errorf("profile = %+v", p)
	}
	if got := p.ResolvePath(p.Flush.Path); got != filepath.Join(dir, "plugins", "f") {
		t.Errorf("ResolvePath = %q", got)
	}
	writeFile(t, path, "schema = 1\n[store]\nsegment_size = \"huge\"\n")
	_, err = Load(path, nil)
	if err == nil || !strings.HasPrefix(err.Error(), path+":3:16: store.segment_size: invalid size \"huge\"") {
		t.Errorf("err = %v", err)
	}
}

func TestOverrides(t *testing.T) {
	doc := `schema = 1
[store]
segment_size = "1GiB"
[flush]
plugin = "async"
[flush.config]
interval = "500ms"
`
	p := mustLoad(t, doc,
		"store.segment_size=64MiB",
		"store.default_queues=8",             // TOML integer
		"server.broker_addr=127.0.0.1:0",     // not TOML: taken as a string
		`server.broker_name="broker-z"`,      // a quoted TOML string
		"store.delete_when=04;16",            // not TOML: a string
		"store.check_crc_on_recover = false", // spaces around '=' are allowed
		"flush.config.interval=1s",           // reaches the plugin
		"flush.config.least_pages=[4, 8]",    // an array
		"store.segment_size=128MiB",          // a later override wins
		"replication.secret=a=b",             // only the first '=' splits
		`store.dir=x = 1`,                    // not one TOML value: a string
		`server.namesrv_addrs=["127.0.0.1:20876"]`,
	)
	if p.Store.SegmentSize != 128<<20 || p.Store.DefaultQueues != 8 || p.Store.DeleteWhen != "04;16" || p.Store.CheckCRCOnRecover {
		t.Errorf("store = %+v", p.Store)
	}
	if p.Server.BrokerAddr != "127.0.0.1:0" || p.Server.BrokerName != "broker-z" || p.Store.Dir != "x = 1" {
		t.Errorf("server = %+v", p.Server)
	}
	if p.Replication.Secret != "a=b" {
		t.Errorf("secret = %q", p.Replication.Secret)
	}
	if got := p.Flush.Config["interval"]; got != "1s" {
		t.Errorf("flush.config.interval = %v", got)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
