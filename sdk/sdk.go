// Package sdk is keel's public plugin API: the Go interfaces a flush
// strategy, a replicator and an indexer implement, and the Host interface
// through which each of them reaches the store.
//
// The same interface value is served two ways, and a plugin cannot tell
// which: in-process (a builtin, a plain Go method call, ~50 ns) and as an
// external process started through hashicorp/go-plugin, whose Host calls
// travel over a plain unix socket (the lane; ~120 µs a round trip on a
// loaded 2-vCPU VM, against ~50 µs for the bare socket and ~280 µs over
// go-plugin's gRPC: docs/performance.md), whose ReadLog reads the store's
// segment files directly, and whose WaitCommitted reads the host's
// committed offset from a shared page while the log grows (a call only
// to wait past its end). Because of the second, every exchange here
// carries ranges and batches ("the log is committed up to X", "index
// records [a,b)"), never one call per message.
//
// # Capabilities
//
// The required interfaces are small. Further capabilities are optional
// interfaces discovered by type assertion (hashicorp/raft's pattern), so a
// plugin written against an older sdk keeps working: StatusReporter,
// MetricsWriter, Promoter, ForceWriter.
//
// # Goroutines
//
// The host calls Configure, then Start, once each, from one goroutine, and
// Stop once at shutdown; none of them runs concurrently with another of
// them. Other methods may be called from any goroutine after Start returns
// and must be safe for concurrent use unless their comment says otherwise.
// A plugin may call Host methods from any goroutine at any time between
// Start and the return of Stop.
package sdk

import (
	"context"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/epoch"
	"github.com/keelmq/keel/internal/pluginwire"
)

// Version is the plugin protocol version. The host refuses plugins built
// against another major version at handshake.
const Version = pluginwire.ProtocolVersion

// The roles a node has, as Config.Role gives them (the profile's
// replication.role): the one spelling the host, the profile and the
// replication building blocks share.
const (
	RoleMaster = "master"
	RoleSlave  = "slave"
)

// Kind names a plugin kind.
type Kind string

// The plugin kinds.
const (
	KindFlush       Kind = "flush"
	KindReplication Kind = "replication"
	KindIndex       Kind = "index"
)

// Errors a plugin or the host may return; test with errors.Is. Across the
// process boundary they keep their identity (the gRPC glue maps them to
// status codes and back; the values are defined with that mapping).
var (
	// ErrUnavailable: the plugin (or a peer it depends on) cannot serve
	// the request now; retrying later may succeed.
	ErrUnavailable = pluginwire.ErrUnavailable
	// ErrTimeout: a wait ran out of time; the data it waited for is still
	// stored.
	ErrTimeout = pluginwire.ErrTimeout
	// ErrInvalidConfig: Configure rejected the plugin's configuration.
	ErrInvalidConfig = pluginwire.ErrInvalidConfig
	// ErrOffset: an offset outside the log or not on a record boundary.
	ErrOffset = pluginwire.ErrOffset
	// ErrNotSupported: an optional operation this plugin does not do.
	ErrNotSupported = pluginwire.ErrNotSupported
	// ErrFenced: the write was refused because this node must not accept
	// writes at those offsets (a master behind its slave; see Promoter).
	ErrFenced = pluginwire.ErrFenced
)

// Positions are the store's offsets (physical commitlog byte offsets) and
// its current epoch: core's own snapshot type, documented there. A plugin
// reads Min, Dispatched, Confirm, Flushed, Committed and Epoch; Wrote is
// what the store has written but perhaps not yet committed, and is 0
// across the process boundary.
type Positions = core.Positions

// Epoch is one entry of the log's epoch history: the epoch Epoch began at
// offset StartOffset. Replication compares histories to find where logs
// diverge. It is core's own entry type (package core/epoch, documented
// there), so no copy is made between the store and a plugin.
type Epoch = epoch.Entry

// Config is a plugin's configuration: its own table of the profile, which
// the plugin decodes itself, strictly, with Decode, and the few values the
// host gives it beside. A plugin receives nothing else of the profile (an
// external one receives exactly these fields over the process boundary).
type Config struct {
	// Name is the plugin's name as the profile gives it (a builtin's name,
	// or an external binary's path).
	Name string
	// File is the profile's path (for error messages).
	File string
	// Document is TOML holding the plugin's own table, Section+".config",
	// and nothing else: no key of another table or section, no secret.
	// It is the profile file with every byte outside that table blanked,
	// so the table's keys stand at the line and column they have in File
	// (other lines are empty) and errors Decode reports name File's
	// line:col; the --set overrides that reach the table follow it.
	// Decode it with Decode; it is not the whole profile.
	Document []byte
	// Section is the profile section ("flush", "replication", "index");
	// the plugin's own keys are in Section+".config".
	Section string
	// Role is RoleMaster or RoleSlave (replication plugins care).
	Role string
	// DataDir is a directory the plugin may keep files in (an indexer's
	// index files); it exists.
	DataDir string
	// Addr is the listen or connect address the profile gives the plugin
	// (the HA address for replication), if any.
	Addr string
	// PeerAddr is the master's HA address for a slave, if any.
	PeerAddr string
	// Secret is the shared secret peers authenticate with, if any (the
	// host sets it for the replication plugin only).
	Secret string
}

// Plugin is what every plugin implements.
type Plugin interface {
	// Configure validates and applies cfg. An invalid configuration
	// returns an error wrapping ErrInvalidConfig whose text names the key,
	// its file:line:col and what is allowed (Config.Decode does this).
	Configure(ctx context.Context, cfg Config) error
	// Start begins work. host stays valid until Stop returns.
	Start(ctx context.Context, host Host) error
	// Stop ends work: background goroutines exit and resources are
	// released before it returns. After Stop the plugin is not used again.
	Stop(ctx context.Context) error
}

// Host is the store as a plugin sees it. All methods are safe for
// concurrent use. Errors wrap the sdk sentinels where one applies.
type Host interface {
	// Positions returns the store's offsets.
	Positions(ctx context.Context) (Positions, error)
	// WaitCommitted blocks until the committed offset exceeds after, or
	// ctx ends, and returns it. Notifications coalesce: one return may
	// cover many appends.
	WaitCommitted(ctx context.Context, after int64) (int64, error)
	// Commit moves write-buffered bytes into the log files (a no-op
	// returning Committed when the store has no write buffer) and returns
	// the committed offset.
	Commit(ctx context.Context) (int64, error)
	// Flush makes everything committed durable (fdatasync) and returns the
	// flushed offset. Concurrent calls coalesce into group commits. An I/O
	// error makes the store read-only; the error says so.
	Flush(ctx context.Context) (int64, error)
	// ReadLog returns committed bytes from offset from (a record
	// boundary): whole records, at least one, about maxBytes, never
	// crossing a segment. Empty when from == Committed. ErrOffset when from
	// is below Min or above Committed.
	ReadLog(ctx context.Context, from int64, maxBytes int) ([]byte, error)
	// AppendLog appends replicated bytes (as ReadLog returned them on
	// another node) at offset, which must equal Committed (or anything on
	// an empty store). Records are validated; nothing is written unless
	// all are valid.
	AppendLog(ctx context.Context, offset int64, data []byte) error
	// TruncateLog cuts the log back to offset (a record boundary in
	// [Min, Committed]); queues, indexes' inputs and epochs follow.
	TruncateLog(ctx context.Context, offset int64) error
	// ReadRecord returns the whole record at a physical offset.
	ReadRecord(ctx context.Context, offset int64) ([]byte, error)
	// Epochs returns the epoch history, oldest first.
	Epochs(ctx context.Context) ([]Epoch, error)
	// SetEpochs replaces the epoch history (a follower adopting the
	// leader's history after truncating to the consistent point) or, with
	// one more entry than before, appends one.
	SetEpochs(ctx context.Context, epochs []Epoch) error
	// MetaSnapshot returns the metadata (topics, subscription groups,
	// consumer and delay offsets) as JSON, with their data versions.
	MetaSnapshot(ctx context.Context) ([]byte, error)
	// MetaApply merges a snapshot from MetaSnapshot on another node:
	// topics and groups are replaced when versions differ, consumer and
	// delay offsets merge by maximum (never lowered).
	MetaApply(ctx context.Context, snapshot []byte) error
	// ReportReplication tells the host how far replication got; sync
	// acks and visibility use it. Replicators call it whenever a value
	// changes (coalesced; at most every few ms is plenty). A report that
	// changes Fenced or Reason returns once the host applied it. Across
	// the process boundary one that does not may return before the host
	// has it: it is delivered after every earlier report, and reports
	// made while one is on its way coalesce into the newest (the host
	// keeps only the newest state anyway).
	ReportReplication(ctx context.Context, st ReplicationState) error
	// Log forwards a log line into the host's slog at level (slog levels:
	// -4 debug, 0 info, 4 warn, 8 error) with key/value attributes.
	Log(ctx context.Context, level int, msg string, attrs map[string]string)
}

// FlushAfterer is an optional interface of Hosts (the host process's and
// the one sdk.Serve gives an external plugin both have it): FlushAfter
// blocks until the committed offset exceeds after, or ctx ends (ctx's
// error), then flushes as Flush does and returns the flushed offset. A
// group-commit strategy calls it in a loop: one call per round where
// WaitCommitted then Flush would be two, and across the process boundary
// one round trip instead of a stream message and a call. ErrNotSupported
// means the host predates it; use WaitCommitted and Flush.
type FlushAfterer interface {
	FlushAfter(ctx context.Context, after int64) (int64, error)
}

// WaitThenFlush is FlushAfter's meaning on any Host: WaitCommitted(ctx,
// after), then Flush. Hosts implement FlushAfterer with it, and a caller
// holding a Host without FlushAfterer falls back to it.
func WaitThenFlush(ctx context.Context, h Host, after int64) (int64, error) {
	if _, err := h.WaitCommitted(ctx, after); err != nil {
		return 0, err
	}
	return h.Flush(ctx)
}

// FlushStrategy decides when committed bytes become durable, by calling
// Host.Flush (and Host.Commit for write-buffered stores). Its AckPolicy
// tells the host what a producer's acknowledgement waits for; the host
// waits locally on the store's flushed offset, so no call crosses the
// process boundary per message.
type FlushStrategy interface {
	Plugin
	// AckPolicy is read once after Configure.
	AckPolicy() FlushPolicy
}

// FlushPolicy is what a flush strategy promises.
type FlushPolicy struct {
	// WaitFlush: an ack waits until the flushed offset passes the record
	// (sync flush). A wait longer than Timeout answers FLUSH_DISK_TIMEOUT
	// while the record stays stored.
	WaitFlush bool
	Timeout   time.Duration
	// VisibleAfterFlush: consumers see only flushed records.
	VisibleAfterFlush bool
	// WriteBuffer: appends go to an in-memory buffer that Host.Commit
	// moves into the files; readers see only committed bytes.
	WriteBuffer bool
}

// Replicator copies the log to other nodes (master role) or from a master
// (slave role). A master-role replicator reports acknowledged offsets with
// Host.ReportReplication; a slave-role one appends with Host.AppendLog and
// truncates with Host.TruncateLog. The host never calls it per message.
type Replicator interface {
	Plugin
	// AckPolicy is read once after Configure.
	AckPolicy() ReplicationPolicy
}

// ReplicationPolicy is what a replicator promises.
type ReplicationPolicy struct {
	// WaitReplicas > 0: an ack waits until ReplicationState.AckedOffset
	// passes the record (FLUSH_SLAVE_TIMEOUT after Timeout), and fails at
	// once with SLAVE_NOT_AVAILABLE while fewer than WaitReplicas replicas
	// are in sync.
	WaitReplicas int
	Timeout      time.Duration
	// VisibleAfterReplicated: consumers on the master see only records
	// AckedOffset covers.
	VisibleAfterReplicated bool
	// AllowFewer relaxes the SLAVE_NOT_AVAILABLE rule (Kafka's
	// min.insync.replicas, RocketMQ 5's minInSyncReplicas): while fewer
	// than WaitReplicas but at least MinReplicas replicas are in sync,
	// an ack waits for AckedOffset as the replicator computes it with the
	// replicas it has (the replicator's rule must then count them), and
	// with no replica in sync (MinReplicas 0) for no replica at all: the
	// master alone holds the record. False (the zero value): exactly
	// WaitReplicas, as above. The host may withhold it while it cannot
	// show that the replicas gone are also out of the controller's
	// SyncStateSet (cluster mode), and there it also requires every
	// replica of that set to hold the record (docs/cluster.md).
	AllowFewer bool
	// MinReplicas is the fewest in-sync replicas with which acks proceed
	// under AllowFewer, 0 to WaitReplicas-1.
	MinReplicas int
}

// ReplicationState is a replicator's progress report.
type ReplicationState struct {
	// AckedOffset: every byte below it is held by the replicas the
	// replicator's own rule counts (by default at least WaitReplicas
	// in-sync replicas, received or flushed as the plugin says; with
	// sdk/replication, its Policy decides which replicas count), and
	// never beyond what those replicas hold. Never decreases while the
	// plugin runs.
	AckedOffset int64
	// InSync is the number of replicas currently in the in-sync set.
	InSync int
	// Fenced: this master must not accept writes (it is behind a replica);
	// Reason says why. The host refuses appends while set.
	Fenced bool
	Reason string
	// Replicas describes each peer.
	Replicas []ReplicaState
}

// ReplicaState is one peer as the replicator sees it.
type ReplicaState struct {
	ID          string // peer identity (address or configured id)
	Addr        string
	AckOffset   int64
	LagBytes    int64
	LagSeconds  float64
	InSync      bool
	Connected   bool
	LastContact time.Time
}

// Indexer receives dispatched records in log order and answers queries.
type Indexer interface {
	Plugin
	// Index adds a batch of records. It is called by one goroutine, in
	// log order; after a crash, records after the last Sync are indexed
	// again, so it must be idempotent for records already seen.
	Index(ctx context.Context, batch []Record) error
	// Sync makes everything indexed so far durable.
	Sync(ctx context.Context) error
	// Query returns physical offsets of records matching q, newest first,
	// at most q.Max. Offsets may include hash collisions: the host filters
	// them by reading the records' keys.
	Query(ctx context.Context, q Query) ([]int64, error)
}

// Record is what an indexer receives per dispatched record: core's own
// dispatch record (core.DispatchRecord), so the store's batch reaches a
// builtin indexer without a copy. A plugin may rely on these fields and
// no others:
//
//   - Topic, QueueID and QueueOffset: the record's queue and its position
//     in it.
//   - PhysOffset and Size: where the whole record lies in the log
//     (Host.ReadRecord reads it back).
//   - TagsCode: record.TagsHashCode of its TAGS property, 0 without tags.
//   - StoreTimestamp: when the store wrote it, Unix milliseconds.
//   - SysFlag: its record.SysFlag* bits (compression, transaction type).
//   - Keys: the raw KEYS property, keys separated by spaces (record.IndexKeys
//     splits it); UniqKey: the UNIQ_KEY property. Either may be empty.
//
// Index's batch is the store's: it is valid only during the call, and the
// same slice goes to every listener in turn, so an indexer must neither
// modify it nor keep it (it may keep the Record values it copies out: their
// strings are never reused). An external plugin receives the same fields
// over the process boundary.
type Record = core.DispatchRecord

// Query asks an indexer for records by key.
type Query struct {
	Topic string
	Key   string
	Begin int64 // store timestamp range, Unix ms, inclusive; 0 = unbounded
	End   int64
	Max   int
}

// StatusReporter is an optional interface: a plugin's state for /status.
type StatusReporter interface {
	// Status returns a JSON object.
	Status(ctx context.Context) ([]byte, error)
}

// MetricsWriter is an optional interface: a plugin's metrics, collected at
// scrape time.
type MetricsWriter interface {
	// WriteMetrics returns Prometheus text exposition lines.
	WriteMetrics(ctx context.Context) ([]byte, error)
}

// Promoter is an optional interface of replicators that can change role.
type Promoter interface {
	// Promote makes this node the master with a new epoch (greater than
	// every epoch it knows) starting at its committed offset.
	Promote(ctx context.Context) (epoch int32, err error)
}

// ForceWriter is an optional interface of replicators that fence writes:
// Force lifts the fence an operator has judged safe to lift (the data the
// replicas hold beyond this node's log is given up).
type ForceWriter interface {
	ForceWrites(ctx context.Context) error
}
