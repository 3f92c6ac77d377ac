// Package replicationsync is keel's synchronous master/slave replication
// plugin (RocketMQ's SYNC_MASTER): a producer's acknowledgement waits until
// wait_replicas in-sync replicas (default 1) acknowledged its record, up to
// timeout (default 3 s) → FLUSH_SLAVE_TIMEOUT, the record staying stored.
// With fewer in-sync replicas than wait_replicas the producer gets
// SLAVE_NOT_AVAILABLE at once. A replica more than max_lag (default 256 MiB)
// behind the master's committed offset leaves the in-sync set.
//
// The acknowledged offset is the wait_replicas-th highest acknowledgement
// among in-sync replicas; ack_on says what a replica's acknowledgement
// means: "received" (appended, in its page cache: RocketMQ's meaning) or
// "flushed" (fsynced on the replica first). With visible_after_replicated
// consumers on the master see only acknowledged records, so no consumer can
// hold an offset a failover later loses.
//
// Everything is composed from sdk/replication's blocks; see
// replication.Node for the protocol, the epoch handshake, fencing of a
// master behind its replica, metadata sync and promotion.
//
// # Configuration
//
//	[replication]
//	plugin = "sync"
//	role = "master"                 # or "slave" with master_addr
//	secret = "..."
//	[replication.config]
//	wait_replicas = 1
//	min_in_sync_replicas = 1        # 0: a master whose replicas are all gone acks alone
//	timeout = "3s"
//	ack_on = "received"             # or "flushed"
//	visible_after_replicated = false
//	max_lag = "256MiB"
//	max_lag_time = "2s"
//	batch_size = "1MiB"
//	heartbeat_interval = "2s"
//	idle_timeout = "20s"
//	sync_meta_interval = "1s"
//	reconnect_backoff = "200ms"
//	reconnect_backoff_max = "5s"
//	handshake_timeout = "10s"
//	max_frame_size = "32MiB"
//	start_fenced = "empty"          # "always" | "never"
//	node_id = ""
package replicationsync

import (
	"fmt"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/replication"
)

// Name is the plugin's name in a profile's [replication] plugin key.
const Name = "sync"

// Defaults of the sync-only keys.
const (
	DefaultWaitReplicas = 1
	DefaultTimeout      = replication.DefaultTimeout
)

// Config is the [replication.config] table.
type Config struct {
	replication.CommonConfig
	WaitReplicas           int                  `toml:"wait_replicas"`
	MinInSyncReplicas      *int                 `toml:"min_in_sync_replicas"`
	Timeout                replication.Duration `toml:"timeout"`
	AckOn                  string               `toml:"ack_on"`
	VisibleAfterReplicated bool                 `toml:"visible_after_replicated"`
}

// Plugin is the sync replicator: a replication.Plugin with this package's
// options (sdk.Replicator, sdk.Promoter, sdk.ForceWriter, sdk.StatusReporter
// and sdk.MetricsWriter).
type Plugin = replication.Plugin

// New returns an unconfigured sync replicator (the builtin catalog's
// constructor).
func New() *Plugin { return replication.NewPlugin(options) }

// NewReplicator is New as an sdk.Replicator.
func NewReplicator() sdk.Replicator { return New() }

// options decodes [replication.config] strictly (unknown keys and wrong
// types are errors wrapping sdk.ErrInvalidConfig that name the key).
// wait_replicas must be at least 1 and timeout positive.
func options(cfg sdk.Config) (replication.Options, error) {
	c := Config{WaitReplicas: DefaultWaitReplicas, Timeout: replication.Duration(DefaultTimeout)}
	if err := replication.DecodeConfig(cfg, &c); err != nil {
		return replication.Options{}, err
	}
	if c.WaitReplicas < 1 {
		return replication.Options{}, fmt.Errorf("%w: %s: replication.config.wait_replicas = %d is not allowed: want >= 1 (use the async plugin for acks that do not wait)",
			sdk.ErrInvalidConfig, cfg.File, c.WaitReplicas)
	}
	if c.Timeout.D() <= 0 {
		return replication.Options{}, fmt.Errorf("%w: %s: replication.config.timeout must be > 0", sdk.ErrInvalidConfig, cfg.File)
	}
	o := c.CommonConfig.Options()
	o.WaitReplicas, o.Timeout, o.AckOn, o.VisibleAfterReplicated = c.WaitReplicas, c.Timeout.D(), c.AckOn, c.VisibleAfterReplicated
	if c.MinInSyncReplicas != nil { // unset: never fewer than wait_replicas
		if *c.MinInSyncReplicas < 0 || *c.MinInSyncReplicas > c.WaitReplicas {
			return replication.Options{}, fmt.Errorf("%w: %s: replication.config.min_in_sync_replicas = %d is not allowed: want 0 to wait_replicas (%d)",
				sdk.ErrInvalidConfig, cfg.File, *c.MinInSyncReplicas, c.WaitReplicas)
		}
		o.AllowFewer, o.MinInSyncReplicas = true, *c.MinInSyncReplicas
	}
	return o, nil
}
