package replication

import (
	"fmt"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
)

// Defaults of Options, following RocketMQ where it has a counterpart.
const (
	DefaultBatchSize         = 1 << 20 // RocketMQ haTransferBatchSize is 32 KiB; larger batches copy faster
	DefaultHeartbeatInterval = 2 * time.Second
	DefaultIdleTimeout       = 20 * time.Second // haHousekeepingInterval
	DefaultMaxLag            = 256 << 20        // haMaxGapNotInSync
	// DefaultMaxLagTime is below DefaultTimeout, so that a replica that
	// stopped acknowledging (paused, stalled disk, half-open link) costs
	// the producers waiting on it at most this long once, not every send
	// its full timeout (RocketMQ's haMaxTimeSlaveNotCatchup is 15 s,
	// Kafka's replica.lag.time.max.ms 30 s).
	DefaultMaxLagTime          = 2 * time.Second
	DefaultTimeout             = 3 * time.Second // slaveTimeout
	DefaultSyncMetaInterval    = time.Second     // RocketMQ syncs every 10 s; a failover loses at most this much metadata
	DefaultReconnectBackoff    = 200 * time.Millisecond
	DefaultReconnectBackoffMax = 5 * time.Second // RocketMQ's slave reconnects every 5 s
	DefaultHandshakeTimeout    = 10 * time.Second
)

// Ack modes (Options.AckOn).
const (
	AckReceived = "received" // the slave appended the bytes (RocketMQ's meaning: in its page cache)
	AckFlushed  = "flushed"  // the slave fsynced them before acknowledging
)

// Start fencing modes (Options.StartFenced).
const (
	StartFencedEmpty  = "empty"  // a master whose log is empty at Start refuses writes until a replica handshake or ForceWrites
	StartFencedAlways = "always" // every master Start refuses writes until a replica handshake or ForceWrites
	StartFencedNever  = "never"
)

// Options configures a Node. Zero values mean the defaults above, except
// the booleans and WaitReplicas (0: acks do not wait).
type Options struct {
	// BatchSize is about how many log bytes one DATA frame carries (at
	// least one whole record; never across a segment or epoch boundary).
	BatchSize int
	// HeartbeatInterval: a master sends a heartbeat, and a slave an ack,
	// after this long without other traffic.
	HeartbeatInterval time.Duration
	// IdleTimeout: either side closes a connection that received nothing
	// for this long. Must exceed 2 × HeartbeatInterval.
	IdleTimeout time.Duration
	// MaxLag: a replica more than this many bytes behind the master's
	// committed offset leaves the in-sync set.
	MaxLag int64
	// MaxLagTime: a replica whose oldest unacknowledged byte was committed
	// longer ago than this leaves the in-sync set, however few bytes it
	// lacks; it rejoins once it has caught up again.
	MaxLagTime time.Duration
	// AckOn is AckReceived or AckFlushed.
	AckOn string
	// WaitReplicas > 0: producers' acks wait until that many in-sync
	// replicas acknowledged their record (the policy the host applies).
	WaitReplicas int
	// Timeout bounds such a wait (FLUSH_SLAVE_TIMEOUT).
	Timeout time.Duration
	// AllowFewer with MinInSyncReplicas below WaitReplicas lets acks
	// proceed while fewer than WaitReplicas but at least MinInSyncReplicas
	// replicas are in sync (waiting for all of those), and with
	// MinInSyncReplicas 0 while none is: a master whose replicas are all
	// gone acknowledges alone (Kafka's min.insync.replicas = 1). Without
	// AllowFewer (the zero value): never fewer than WaitReplicas.
	AllowFewer        bool
	MinInSyncReplicas int
	// VisibleAfterReplicated: consumers on the master see only records the
	// acknowledged offset covers.
	VisibleAfterReplicated bool
	// SyncMetaInterval is how often a master sends its metadata snapshot
	// (when it changed) to each slave.
	SyncMetaInterval time.Duration
	// ReconnectBackoff is a slave's first wait before reconnecting;
	// it doubles up to ReconnectBackoffMax.
	ReconnectBackoff    time.Duration
	ReconnectBackoffMax time.Duration
	// HandshakeTimeout bounds authentication and the epoch handshake.
	HandshakeTimeout time.Duration
	// MaxFrameSize bounds a received frame's payload. It must exceed
	// BatchSize plus the largest record (default DefaultMaxFrame).
	MaxFrameSize int
	// StartFenced is StartFencedEmpty (default), StartFencedAlways or
	// StartFencedNever.
	StartFenced string
	// NodeID names this node to its peers (default: its HA address).
	NodeID string
	// Policy is the master's acknowledgement rule (default:
	// InSyncReplicas{N: WaitReplicas}). WaitReplicas stays the policy the
	// host applies: producers get SLAVE_NOT_AVAILABLE while the policy's
	// Verdict.InSync is below it.
	Policy Policy
}

// allowFewer reports whether MinInSyncReplicas lets acks proceed with
// fewer than WaitReplicas in-sync replicas.
func (o Options) allowFewer() bool {
	return o.AllowFewer && o.WaitReplicas > 0 && o.MinInSyncReplicas >= 0 && o.MinInSyncReplicas < o.WaitReplicas
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	def(&o.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&o.IdleTimeout, max(DefaultIdleTimeout, 3*o.HeartbeatInterval))
	if o.MaxLag == 0 {
		o.MaxLag = DefaultMaxLag
	}
	def(&o.MaxLagTime, DefaultMaxLagTime)
	if o.AckOn == "" {
		o.AckOn = AckReceived
	}
	def(&o.Timeout, DefaultTimeout)
	def(&o.SyncMetaInterval, DefaultSyncMetaInterval)
	def(&o.ReconnectBackoff, DefaultReconnectBackoff)
	def(&o.ReconnectBackoffMax, max(DefaultReconnectBackoffMax, o.ReconnectBackoff))
	def(&o.HandshakeTimeout, DefaultHandshakeTimeout)
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = DefaultMaxFrame
	}
	if o.StartFenced == "" {
		o.StartFenced = StartFencedEmpty
	}
	if o.Policy == nil {
		o.Policy = defaultPolicy(o)
	}
	return o
}

// Validate checks o (after WithDefaults). The error wraps
// sdk.ErrInvalidConfig and names the TOML key.
func (o Options) Validate() error { return o.validate("") }

func (o Options) validate(prefix string) error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s%s: %s", sdk.ErrInvalidConfig, prefix, key, fmt.Sprintf(format, args...))
	}
	switch {
	case o.BatchSize < 1024 || o.BatchSize > 64<<20:
		return bad("batch_size", "%d is not allowed: want 1KiB..64MiB", o.BatchSize)
	case o.MaxFrameSize < o.BatchSize+DataHeaderSize+(4<<20)+(64<<10):
		return bad("max_frame_size", "%d is too small: must exceed batch_size (%d) plus the largest record (4 MiB body and properties)", o.MaxFrameSize, o.BatchSize)
	case o.MaxFrameSize > 1<<30:
		return bad("max_frame_size", "%d is too large (max 1GiB)", o.MaxFrameSize)
	case o.HeartbeatInterval < time.Millisecond:
		return bad("heartbeat_interval", "%s is not allowed: want >= 1ms", o.HeartbeatInterval)
	case o.IdleTimeout < 2*o.HeartbeatInterval:
		return bad("idle_timeout", "%s must be at least twice heartbeat_interval (%s)", o.IdleTimeout, o.HeartbeatInterval)
	case o.MaxLag < 1:
		return bad("max_lag", "%d is not allowed: want > 0 bytes", o.MaxLag)
	case o.MaxLagTime < 10*time.Millisecond:
		return bad("max_lag_time", "%s is not allowed: want >= 10ms", o.MaxLagTime)
	case o.AckOn != AckReceived && o.AckOn != AckFlushed:
		return bad("ack_on", "%q is not allowed: want %q or %q", o.AckOn, AckReceived, AckFlushed)
	case o.WaitReplicas < 0 || o.WaitReplicas > 16:
		return bad("wait_replicas", "%d is not allowed: want 1..16", o.WaitReplicas)
	case o.Timeout < time.Millisecond:
		return bad("timeout", "%s is not allowed: want >= 1ms", o.Timeout)
	case o.AllowFewer && (o.MinInSyncReplicas < 0 || o.MinInSyncReplicas > o.WaitReplicas):
		return bad("min_in_sync_replicas", "%d is not allowed: want 0 to wait_replicas (%d)", o.MinInSyncReplicas, o.WaitReplicas)
	case o.SyncMetaInterval < 10*time.Millisecond:
		return bad("sync_meta_interval", "%s is not allowed: want >= 10ms", o.SyncMetaInterval)
	case o.ReconnectBackoff < time.Millisecond:
		return bad("reconnect_backoff", "%s is not allowed: want >= 1ms", o.ReconnectBackoff)
	case o.ReconnectBackoffMax < o.ReconnectBackoff:
		return bad("reconnect_backoff_max", "%s is below reconnect_backoff (%s)", o.ReconnectBackoffMax, o.ReconnectBackoff)
	case o.HandshakeTimeout < time.Millisecond:
		return bad("handshake_timeout", "%s is not allowed: want >= 1ms", o.HandshakeTimeout)
	case o.StartFenced != StartFencedEmpty && o.StartFenced != StartFencedAlways && o.StartFenced != StartFencedNever:
		return bad("start_fenced", "%q is not allowed: want %q, %q or %q", o.StartFenced, StartFencedEmpty, StartFencedAlways, StartFencedNever)
	case len(o.NodeID) > MaxIDLen:
		return bad("node_id", "longer than %d bytes", MaxIDLen)
	}
	return nil
}

// Duration is a TOML duration: a string with a unit ("500ms", "10s"); a
// bare number is refused. It is sdk/config's type.
type Duration = config.Duration

// Size is a TOML byte size: an integer number of bytes or a string with a
// unit ("32KiB", "256MiB"). It is sdk/config's type.
type Size = config.Size

// CommonConfig holds the keys every replication plugin built on this
// package accepts in its [<section>.config] table; plugins embed it in their
// config struct.
type CommonConfig struct {
	BatchSize           Size     `toml:"batch_size"`
	HeartbeatInterval   Duration `toml:"heartbeat_interval"`
	IdleTimeout         Duration `toml:"idle_timeout"`
	MaxLag              Size     `toml:"max_lag"`
	MaxLagTime          Duration `toml:"max_lag_time"`
	SyncMetaInterval    Duration `toml:"sync_meta_interval"`
	ReconnectBackoff    Duration `toml:"reconnect_backoff"`
	ReconnectBackoffMax Duration `toml:"reconnect_backoff_max"`
	HandshakeTimeout    Duration `toml:"handshake_timeout"`
	MaxFrameSize        Size     `toml:"max_frame_size"`
	StartFenced         string   `toml:"start_fenced"`
	NodeID              string   `toml:"node_id"`
}

// Options returns the Options these keys describe (zero = default).
func (c CommonConfig) Options() Options {
	return Options{
		BatchSize: int(c.BatchSize), HeartbeatInterval: c.HeartbeatInterval.D(), IdleTimeout: c.IdleTimeout.D(),
		MaxLag: int64(c.MaxLag), MaxLagTime: c.MaxLagTime.D(), SyncMetaInterval: c.SyncMetaInterval.D(), ReconnectBackoff: c.ReconnectBackoff.D(),
		ReconnectBackoffMax: c.ReconnectBackoffMax.D(), HandshakeTimeout: c.HandshakeTimeout.D(),
		MaxFrameSize: int(c.MaxFrameSize), StartFenced: c.StartFenced, NodeID: c.NodeID,
	}
}

// DecodeConfig decodes the table cfg.Section+".config" of cfg.Document
// strictly into out, a pointer to a struct with toml tags that holds the
// defaults: an unknown key or a value of the wrong type is an error
// wrapping sdk.ErrInvalidConfig whose text gives file:line:col, the dotted
// key and what is allowed. Keys outside that table are ignored; a document
// without the table leaves out unchanged. An empty Section means
// "replication". It is sdk.Config.Decode (sdk/config.DecodeSection).
func DecodeConfig(cfg sdk.Config, out any) error {
	if cfg.Section == "" {
		cfg.Section = string(sdk.KindReplication)
	}
	return cfg.Decode(out)
}
