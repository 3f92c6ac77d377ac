package profile

import (
	"strconv"
	"strings"

	"github.com/keelmq/keel/host/acl"
	"github.com/keelmq/keel/host/schedule"
)

// StoreConfig is the [store] section: the commitlog core's settings. Defaults
// follow Apache RocketMQ's MessageStoreConfig
// (org.apache.rocketmq.store.config.MessageStoreConfig) where it has the
// setting, and are core's own (core.Default*) where core has one.
type StoreConfig struct {
	// Dir is the data directory. Default "data/<profile name>", relative to
	// the working directory; `keel serve --data DIR` overrides it.
	Dir string `toml:"dir" comment:"data directory (relative to the working directory)"`
	// SegmentSize is the size of each commitlog segment file. Default 1GiB
	// (RocketMQ mappedFileSizeCommitLog); 64KiB to 16GiB.
	SegmentSize Size `toml:"segment_size" comment:"commitlog segment file size (RocketMQ mappedFileSizeCommitLog)"`
	// MaxMessageSize is the largest message body accepted. Default 4MiB
	// (RocketMQ maxMessageSize); must be smaller than SegmentSize.
	MaxMessageSize Size `toml:"max_message_size" comment:"largest message body accepted (RocketMQ maxMessageSize)"`
	// CQEntriesPerFile is the number of 20-byte entries per consume queue
	// file. Default 300000 (RocketMQ); 1 to 50,000,000.
	CQEntriesPerFile int `toml:"cq_entries_per_file" comment:"20-byte entries per consume queue file"`
	// FileReservedTime is how long a full segment is kept after its last
	// write. Default "72h" (RocketMQ fileReservedTime).
	FileReservedTime Duration `toml:"file_reserved_time" comment:"keep a full segment this long after its last write (RocketMQ fileReservedTime)"`
	// DeleteWhen lists the hours of day (00-23, ';'-separated) at which
	// expired segments are deleted. Default "04" (RocketMQ deleteWhen).
	DeleteWhen string `toml:"delete_when" comment:"hours of day (00-23, ';'-separated) when expired segments are deleted"`
	// DiskMaxUsedRatio: above this disk usage, segments are deleted even
	// before they expire. Default 0.75 (RocketMQ diskMaxUsedSpaceRatio).
	DiskMaxUsedRatio Ratio `toml:"disk_max_used_ratio" comment:"disk usage above which old segments are deleted early"`
	// DiskCleanForciblyRatio: above this usage, deletion ignores age and the
	// deleteWhen hour. Default 0.85 (RocketMQ diskSpaceCleanForciblyRatio).
	DiskCleanForciblyRatio Ratio `toml:"disk_clean_forcibly_ratio" comment:"disk usage above which deletion ignores age"`
	// DiskWarningRatio: above this usage, appends are refused (disk full).
	// Default 0.90 (RocketMQ diskSpaceWarningLevelRatio). The three ratios
	// must satisfy max_used <= clean_forcibly <= warning, each in (0, 1].
	DiskWarningRatio Ratio `toml:"disk_warning_ratio" comment:"disk usage above which appends are refused"`
	// ReadCache is the size of the read cache; 0 (the default) turns it off.
	ReadCache Size `toml:"read_cache" comment:"read cache size, 0 = off"`
	// CheckCRCOnRecover makes crash recovery verify each record's body CRC.
	// Default true (RocketMQ checkCRCOnRecover).
	CheckCRCOnRecover bool `toml:"check_crc_on_recover" comment:"verify body CRCs during crash recovery"`
	// RecoveryTail bounds what a crash recovery re-reads: how far the log
	// may run ahead of the durable checkpoint (core.Options.RecoveryTail).
	// The store flushes and checkpoints behind the writer at a quarter of
	// it and stalls appends at the whole of it. Default 256MiB; 1MiB to
	// 64GiB, or 0 to turn the bound off.
	RecoveryTail Size `toml:"recovery_tail" comment:"crash recovery re-reads at most this much; appends stall beyond it (0 = unbounded)"`
	// StallTimeout is how long an append waits in a write stall before it
	// fails with SERVICE_NOT_AVAILABLE ("store busy"; nothing is written,
	// the producer retries). Default "5s"; 1ms to 1h.
	StallTimeout Duration `toml:"stall_timeout" comment:"an append stalled this long fails (SERVICE_NOT_AVAILABLE, store busy)"`
	// AutoCreateTopics creates a topic on its first SEND. Default true.
	AutoCreateTopics bool `toml:"auto_create_topics" comment:"create topics on first send"`
	// EnablePropertyFilter evaluates SQL92 subscriptions on the broker
	// (RocketMQ's enablePropertyFilter, whose default is false). Default
	// true; false refuses them with SYSTEM_ERROR.
	EnablePropertyFilter bool `toml:"enable_property_filter" comment:"evaluate SQL92 subscriptions (false refuses them)"`
	// DefaultQueues is the queue count of an auto-created topic. Default 4
	// (RocketMQ defaultTopicQueueNums); 1 to 1024.
	DefaultQueues int `toml:"default_queues" comment:"queues of an auto-created topic"`
	// MessageDelayLevel is the delay level table: space-separated delays,
	// each a positive whole number and a unit s, m, h or d; level n is the
	// n-th (schedule.ParseLevels). Default schedule.DefaultLevels, RocketMQ's
	// messageDelayLevel "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m
	// 30m 1h 2h"; 1 to schedule.MaxLevels entries.
	MessageDelayLevel string `toml:"message_delay_level" comment:"delay level table, level n = the n-th delay (RocketMQ messageDelayLevel)"`
	// TransactionCheckInterval is the time between two checks of
	// undecided transactional messages (RocketMQ's
	// transactionCheckInterval). Default "30s" (txn.DefaultCheckInterval,
	// RocketMQ 5.1.1 and later); 100ms to 24h.
	TransactionCheckInterval Duration `toml:"transaction_check_interval" comment:"time between checks of undecided transactional messages (RocketMQ transactionCheckInterval)"`
	// TransactionTimeout is how long after its birth a half message is
	// left to its producer before it is checked, and after which the
	// producer's own END_TRANSACTION is refused (RocketMQ's
	// transactionTimeOut). Default "6s" (txn.DefaultTimeout); 100ms to 24h.
	TransactionTimeout Duration `toml:"transaction_timeout" comment:"a half message older than this is checked with its producer (RocketMQ transactionTimeOut)"`
	// TransactionCheckMax is how many times a half message is checked
	// before it is moved to TRANS_CHECK_MAX_TIME_TOPIC (RocketMQ's
	// transactionCheckMax). Default 15 (txn.DefaultMaxChecks); 1 to 1000.
	TransactionCheckMax int `toml:"transaction_check_max" comment:"checks of a half message before it is given up (RocketMQ transactionCheckMax)"`
	// TimerEnable accepts timer messages (TIMER_DELAY_SEC, TIMER_DELAY_MS,
	// TIMER_DELIVER_MS; host/timer). Default true (RocketMQ
	// timerWheelEnable); false refuses them with SYSTEM_ERROR.
	TimerEnable bool `toml:"timer_enable" comment:"accept timer messages (false refuses them)"`
	// TimerMaxDelay is the longest timer accepted; a longer one is refused
	// with MESSAGE_ILLEGAL. Default "72h" (timer.DefaultMaxDelay, RocketMQ
	// timerMaxDelaySec); timer.CheckSettings bounds it.
	TimerMaxDelay Duration `toml:"timer_max_delay" comment:"longest timer delay accepted"`
	// TimerPrecision is the width of a timer wheel slot. Default "1s"
	// (timer.DefaultPrecision, RocketMQ timerPrecisionMs); 100ms, 200ms,
	// 500ms or 1s.
	TimerPrecision Duration `toml:"timer_precision" comment:"timer wheel slot width (100ms, 200ms, 500ms or 1s)"`
}

// DeleteHours returns the hours of day listed in DeleteWhen. It is valid only
// on a profile that Load accepted.
func (s StoreConfig) DeleteHours() []int {
	var out []int
	for _, part := range strings.Split(s.DeleteWhen, ";") {
		if h, err := strconv.Atoi(strings.TrimSpace(part)); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// DelayLevels returns the level table MessageDelayLevel names. It is valid
// only on a profile that Load accepted.
func (s StoreConfig) DelayLevels() schedule.Levels {
	l, _ := schedule.ParseLevels(s.MessageDelayLevel)
	return l
}

// PluginSection is a [flush] or [index] section: which plugin, and its
// configuration. Exactly one of Plugin and Path is set after loading.
type PluginSection struct {
	// Plugin names a builtin from the host's catalog ("sync", "async",
	// "hash", "none", ...). Defaults: flush "async", index "hash". Setting
	// path without plugin clears the default.
	Plugin string `toml:"plugin,omitempty" comment:"builtin plugin name"`
	// Path is an external go-plugin binary, absolute or relative to the
	// profile's directory (see Profile.ResolvePath).
	Path string `toml:"path,omitempty" comment:"external plugin binary (relative to the profile's directory)"`
	// SHA256 optionally pins the binary at Path: 64 hex digits.
	SHA256 string `toml:"sha256,omitempty" comment:"pin the external binary's SHA-256"`
	// Config is the plugin's own [<section>.config] table, undecoded. Use
	// Profile.DecodePluginConfig to decode it; nil when absent or empty.
	Config map[string]any `toml:"config,omitempty" comment:"the plugin's own settings"`
}

// Chosen reports whether a plugin section naming plugin (a builtin) and
// path (an external binary) selects a plugin: an external binary, or a
// builtin other than PluginNone. It is the one rule for "this section runs
// a plugin": the host asks it rather than comparing names itself.
func Chosen(plugin, path string) bool { return path != "" || (plugin != "" && plugin != PluginNone) }

// ReplicationSection is the [replication] section: the replication plugin,
// this broker's HA role, and the plugin's configuration.
type ReplicationSection struct {
	// Plugin names a builtin ("none", "async", "sync", ...). Default "none".
	Plugin string `toml:"plugin,omitempty" comment:"builtin plugin name"`
	// Path is an external go-plugin binary (see PluginSection.Path).
	Path string `toml:"path,omitempty" comment:"external plugin binary (relative to the profile's directory)"`
	// SHA256 optionally pins the binary at Path.
	SHA256 string `toml:"sha256,omitempty" comment:"pin the external binary's SHA-256"`
	// Role is "master" (default) or "slave".
	Role string `toml:"role" comment:"master or slave"`
	// MasterAddr is the master's HA address (host:port, non-zero port). A
	// slave requires it; a master must not set it.
	MasterAddr string `toml:"master_addr,omitempty" comment:"slave only: the master's HA address"`
	// Secret is the shared secret HA peers authenticate with. Empty means
	// unauthenticated (Load adds a warning when a replication plugin runs).
	Secret string `toml:"secret,omitempty" comment:"shared secret for HA authentication"`
	// Config is the plugin's own [replication.config] table, undecoded.
	Config map[string]any `toml:"config,omitempty" comment:"the plugin's own settings"`
}

// ServerConfig is the [server] section: the RocketMQ remoting listeners and
// the broker's identity. A listen address is host:port; port 0 picks a free
// port; an empty host listens on all interfaces.
type ServerConfig struct {
	// NamesrvAddr is the name server address. Default "127.0.0.1:9876".
	NamesrvAddr string `toml:"namesrv_addr" comment:"name server address"`
	// BrokerAddr is the broker's listen address. Default "127.0.0.1:10911".
	BrokerAddr string `toml:"broker_addr" comment:"broker listen address"`
	// HAAddr is the HA (replication) listen address. Default
	// "127.0.0.1:10912" (RocketMQ haListenPort).
	HAAddr string `toml:"ha_addr" comment:"HA (replication) listen address"`
	// BrokerName names the master/slave group. Default "broker-a".
	BrokerName string `toml:"broker_name" comment:"broker group name"`
	// Cluster is the cluster name. Default "DefaultCluster".
	Cluster string `toml:"cluster" comment:"cluster name"`
	// BrokerID is 0 for a master, >= 1 for a slave. Default: 0 for a master,
	// 1 for a slave.
	BrokerID int `toml:"broker_id" comment:"0 = master, >= 1 = slave"`
	// MaxConnections caps concurrent client connections. Default 4096.
	MaxConnections int `toml:"max_connections" comment:"maximum concurrent client connections"`
	// MaxFrameSize caps one remoting frame. Default "16MiB"; must exceed
	// store.max_message_size and fit the 32-bit frame length.
	MaxFrameSize Size `toml:"max_frame_size" comment:"largest remoting frame accepted"`
	// RequestBufferBudget bounds the bytes of client requests held in
	// memory at once, across every connection of the name server and
	// broker listeners: a connection whose next frame does not fit waits
	// before reading it (TCP back-pressure). Default "256MiB", or
	// max_frame_size when that is larger; at least max_frame_size, so that
	// any accepted frame fits.
	RequestBufferBudget Size `toml:"request_buffer_budget" comment:"memory for requests in flight, all connections together"`
	// IdleTimeout closes a connection idle this long; "0s" never does.
	// Default "120s" (RocketMQ channelExpiredTimeout and the Go client's
	// read deadline).
	IdleTimeout Duration `toml:"idle_timeout" comment:"close connections idle this long (0s = never)"`
	// SlaveBrokerAddr is refused when set: slaves register themselves
	// with the name servers (NamesrvAddrs). It is kept as a key only so
	// that an old profile gets that explanation, not "unknown key".
	SlaveBrokerAddr string `toml:"slave_broker_addr,omitempty" comment:"no longer used: slaves register themselves"`
	// Roles are what this process runs (RoleNamesrv, RoleBroker,
	// RoleController), each once. Default [namesrv, broker]: one broker
	// with its own name server, which `make run` starts. A process
	// without RoleBroker has no store and loads no plugin.
	Roles []string `toml:"roles" comment:"what this process runs: namesrv, broker, controller"`
	// NamesrvAddrs are the name servers a broker registers with (REGISTER_BROKER
	// at start, every register_interval and on change; UNREGISTER_BROKER
	// at stop), beside its own when it also runs RoleNamesrv. A broker
	// without RoleNamesrv needs at least one.
	NamesrvAddrs []string `toml:"namesrv_addrs,omitempty" comment:"name servers this broker registers with"`
	// RegisterInterval is the period of re-registration. Default "30s"
	// (RocketMQ registerNameServerPeriod); 1s to 60s.
	RegisterInterval Duration `toml:"register_interval" comment:"how often a broker registers with its name servers"`
}

// ControllerConfig is the [controller] section: the raft controller this
// process runs (server.roles has RoleController), and the controllers a
// broker in cluster mode follows (Addrs).
type ControllerConfig struct {
	// Addrs are the controllers' remoting addresses a broker heartbeats
	// to. Set, the broker is in cluster mode: the controller decides
	// whether it is master or slave (replication.role and
	// replication.master_addr must be left unset) and elects a new master
	// when one dies. Empty: today's fixed roles.
	Addrs []string `toml:"addrs,omitempty" comment:"broker: the controllers to follow (cluster mode)"`
	// Addr is the controller's remoting listen address (RoleController).
	// Default "127.0.0.1:9878".
	Addr string `toml:"addr" comment:"controller: remoting listen address"`
	// RaftAddr is the controller's raft transport address, bound and
	// advertised (RoleController). Default "127.0.0.1:9880".
	RaftAddr string `toml:"raft_addr" comment:"controller: raft transport address"`
	// NodeID is this controller's raft id (RoleController). Default "c0".
	NodeID string `toml:"node_id" comment:"controller: raft server id"`
	// Peers is the raft group to bootstrap, "id=host:port" each (raft
	// addresses), used only when Dir holds no raft state yet. Default:
	// this controller alone.
	Peers []string `toml:"peers,omitempty" comment:"controller: the raft group, id=host:port each"`
	// Dir holds the raft log, stable store and snapshots. Default
	// <store.dir>/controller.
	Dir string `toml:"dir" comment:"controller: raft data directory"`
	// HeartbeatTimeout: a broker silent this long is dead; its group
	// elects a new master if it was the master. Default "3s".
	HeartbeatTimeout Duration `toml:"heartbeat_timeout" comment:"controller: a broker silent this long is dead"`
	// ElectUnclean allows electing a member outside the SyncStateSet when
	// none of it is alive; such a master may lack acknowledged writes.
	ElectUnclean bool `toml:"elect_unclean" comment:"controller: allow electing outside the SyncStateSet"`
}

// AdminConfig is the [admin] section: the HTTP listener for /metrics,
// /status and /debug/pprof.
type AdminConfig struct {
	// Addr is the admin listen address. Default "127.0.0.1:10914".
	Addr string `toml:"addr" comment:"admin HTTP listen address (/metrics, /status, /debug/pprof)"`
}

// document is the TOML shape of a profile.
type document struct {
	Schema      int                `toml:"schema"`
	Store       StoreConfig        `toml:"store"`
	Flush       PluginSection      `toml:"flush"`
	Replication ReplicationSection `toml:"replication"`
	Index       PluginSection      `toml:"index"`
	Server      ServerConfig       `toml:"server"`
	Controller  ControllerConfig   `toml:"controller"`
	Admin       AdminConfig        `toml:"admin"`
	ACL         acl.Config         `toml:"acl"`
}
