// Package replicationasync is keel's asynchronous master/slave replication
// plugin (RocketMQ's ASYNC_MASTER): a producer's acknowledgement does not
// wait for any replica. The master streams its committed log to every
// slave that connects to its HA address; each slave appends the bytes at
// identical offsets and builds its own consume queues and indexes by
// dispatch. Lag in bytes and seconds is exported per replica (Status,
// WriteMetrics and the host's ReplicationState).
//
// Everything is composed from sdk/replication's blocks; see
// replication.Node for the protocol, the epoch handshake, fencing of a
// master behind its replica, metadata sync and promotion.
//
// # Configuration
//
//	[replication]
//	plugin = "async"
//	role = "master"                 # or "slave" with master_addr
//	secret = "..."                  # shared HA secret
//	[replication.config]
//	batch_size = "1MiB"             # bytes per DATA frame (never across a segment or epoch)
//	heartbeat_interval = "2s"
//	idle_timeout = "20s"
//	max_lag = "256MiB"              # beyond this a replica leaves the in-sync set
//	max_lag_time = "2s"              # a replica this long behind leaves it too
//	ack_on = "received"             # or "flushed": what a replica's ack means
//	visible_after_replicated = false
//	sync_meta_interval = "1s"
//	reconnect_backoff = "200ms"
//	reconnect_backoff_max = "5s"
//	handshake_timeout = "10s"
//	max_frame_size = "32MiB"
//	start_fenced = "empty"          # "always" | "never"
//	node_id = ""
//
// wait_replicas and timeout belong to the sync plugin and are rejected
// here.
package replicationasync

import (
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/replication"
)

// Name is the plugin's name in a profile's [replication] plugin key.
const Name = "async"

// Config is the [replication.config] table.
type Config struct {
	replication.CommonConfig
	AckOn                  string `toml:"ack_on"`
	VisibleAfterReplicated bool   `toml:"visible_after_replicated"`
}

// Plugin is the async replicator: a replication.Plugin with this package's
// options (sdk.Replicator, sdk.Promoter, sdk.ForceWriter, sdk.StatusReporter
// and sdk.MetricsWriter).
type Plugin = replication.Plugin

// New returns an unconfigured async replicator (the builtin catalog's
// constructor).
func New() *Plugin { return replication.NewPlugin(options) }

// NewReplicator is New as an sdk.Replicator.
func NewReplicator() sdk.Replicator { return New() }

// options decodes [replication.config] strictly (unknown keys and wrong
// types are errors wrapping sdk.ErrInvalidConfig that name the key).
// Acknowledgements never wait: AckPolicy().WaitReplicas is 0.
func options(cfg sdk.Config) (replication.Options, error) {
	var c Config
	if err := replication.DecodeConfig(cfg, &c); err != nil {
		return replication.Options{}, err
	}
	o := c.CommonConfig.Options()
	o.AckOn, o.VisibleAfterReplicated, o.WaitReplicas = c.AckOn, c.VisibleAfterReplicated, 0
	return o, nil
}
