// Package engine runs one benchmark cell: the real core store in-process
// under one combination of flush strategy, replication and index, with P
// producer goroutines (and, for produce-consume, one consumer per queue),
// for a warmup and a measured window, and reports throughput, ack latency,
// CPU cost, fsync rate, statuses and replication lag.
//
// Each axis runs the plugin the matrix resolves it to (matrix.Plugin), made
// by a Loader: a builtin name from the catalog in-process or as keel's own
// external binary, or a declared binary. A builtin name not in the catalog,
// or an external binary not found, fails with ErrUnavailable and the cell
// is reported as skipped. Nothing a run starts outlives it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk/storehost"
)

// Producer statuses, as RocketMQ's SendStatus names them, plus ERROR.
const (
	StatusOK                = "SEND_OK"
	StatusFlushDiskTimeout  = "FLUSH_DISK_TIMEOUT"
	StatusFlushSlaveTimeout = "FLUSH_SLAVE_TIMEOUT"
	StatusSlaveNotAvailable = "SLAVE_NOT_AVAILABLE"
	StatusError             = "ERROR"
)

// ErrUnavailable means the cell cannot run here (a builtin name this
// build's catalog lacks, or an external binary not found); it is reported
// as skipped.
var ErrUnavailable = errors.New("cell not available")

// DefaultTopic is the topic benchmark messages go to.
const DefaultTopic = "BenchTopic"

// Spec describes one run of one cell.
type Spec struct {
	Cell matrix.Cell
	// Plugins are what the cell's axes run (matrix.Config.PluginsOf);
	// the zero value resolves Cell's values as builtin names in Cell.Mode.
	Plugins matrix.CellPlugins
	// Loader makes them; nil is a Loader with the default catalog.
	Loader *Loader
	// Dir is a scratch directory for this run; it is created and removed
	// afterwards.
	Dir         string
	Warmup      time.Duration
	Duration    time.Duration
	SegmentSize int64
	// Queues of the topic; producer i writes queue i mod Queues. Default 8.
	Queues int
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// Result is what one run measured. Counts cover only acks whose append
// started inside the measured window.
type Result struct {
	// Impl says what ran (matrix.Describe): "flush=sync (builtin)
	// index=hash (external)".
	Impl        string
	Msgs        int64
	Elapsed     time.Duration
	MsgsPerSec  float64
	MBPerSec    float64 // payload (body) bytes, 10^6 per second
	StoredMBPS  float64 // stored record bytes, header included
	RecordBytes int     // stored size of one message
	// Latency is the producer-observed ack latency (append to ack), ns.
	Latency hist.Histogram
	// CPUSecPerMillion is user+system CPU of the whole process during the
	// window, per million acked messages.
	CPUSecPerMillion float64
	Fsyncs           int64 // Host.Flush calls that made new bytes durable
	FsyncsPerSec     float64
	Statuses         map[string]int64
	// Replication lag (master committed minus acknowledged), sampled every
	// 5 ms during the window; 0 without replication.
	ReplLagMaxBytes  int64
	ReplLagMeanBytes float64
	// Consumer side (produce-consume): messages received in the window and
	// the end-to-end latency from the producer's append to the consumer's
	// read.
	Consumed      int64
	ConsumePerSec float64
	EndToEnd      hist.Histogram
}

// RecordSize is the stored size of a benchmark message with a body of
// bodyBytes (header, topic and properties included).
func RecordSize(bodyBytes int) int {
	m := benchMessage(DefaultTopic, 0, make([]byte, bodyBytes))
	b, err := record.Encode(nil, m, record.Limits{MaxMessageSize: max(bodyBytes, record.DefaultMaxMessageSize)})
	if err != nil {
		return bodyBytes
	}
	return len(b)
}

var (
	bornHost  = netip.MustParseAddrPort("127.0.0.1:50000")
	storeHost = netip.MustParseAddrPort("127.0.0.1:10911")
)

// props is a fixed-length property string: KEYS and UNIQ_KEY are hex
// counters rewritten in place for every message (so every record has the
// same size and the index sees distinct keys).
const (
	propsTemplate = "KEYS\x01................\x02UNIQ_KEY\x01................................\x02WAIT\x01true\x02"
	keysAt        = len("KEYS\x01")
	uniqAt        = len("KEYS\x01................\x02UNIQ_KEY\x01")
)

func benchMessage(topic string, qid int32, body []byte) *record.Message {
	return &record.Message{Topic: topic, QueueID: qid, Body: body, Properties: []byte(propsTemplate),
		BornTimestamp: time.Now().UnixMilli(), BornHost: bornHost, StoreHost: storeHost}
}

func putHex(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = digits[v&15]
		v >>= 4
	}
}

// Retention is the retention configuration of benchmark stores: scratch
// stores on a shared disk, so appends are refused only above 99 % disk use
// (the core's default refuses above 90 %, which other data on the disk can
// reach) and nothing is deleted by age.
var Retention = core.RetentionOptions{FileReservedTime: -1, DiskMaxUsedRatio: 0.97, CleanForciblyRatio: 0.98, WarningRatio: 0.99}

// MaxMessageSize is the body limit of benchmark stores with segments of
// segmentSize: the core default, or half a segment for small segments.
func MaxMessageSize(segmentSize int64) int {
	return int(min(int64(record.DefaultMaxMessageSize), segmentSize/2))
}

// Run runs one cell once: it opens the cell (openCell: makes and starts
// its plugins), waits until a replicating master takes writes, primes
// the store, measures (measure) and tears the cell down, reporting
// teardown errors with the result.
func Run(ctx context.Context, spec Spec) (res *Result, err error) {
	if spec.Queues <= 0 {
		spec.Queues = 8
	}
	if spec.SegmentSize <= 0 {
		spec.SegmentSize = 128 << 20
	}
	if spec.Logger == nil {
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	if spec.Plugins.Flush.Name == "" {
		spec.Plugins = (&matrix.Config{}).PluginsOf(spec.Cell)
	}
	if spec.Loader == nil {
		spec.Loader = &Loader{}
	}
	if err := vfs.OS.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cell dir: %w", err)
	}
	defer func() {
		if rerr := vfs.OS.RemoveAll(spec.Dir); rerr != nil && err == nil {
			err = fmt.Errorf("remove cell dir: %w", rerr)
		}
	}()
	cl, err := openCell(ctx, spec)
	defer cl.shutdown() // a no-op after the orderly teardown below
	if err != nil {
		return nil, err
	}
	if err := cl.waitUnfenced(ctx); err != nil {
		return nil, err
	}
	// Prime: the first append creates the first segment (on the slave
	// too), synchronously; do it before the clock starts so the window
	// measures the steady state, not store creation.
	if err := prime(ctx, cl.store, cl.sh, cl.repl != nil); err != nil {
		return nil, err
	}
	if res, err = cl.measure(ctx, spec, matrix.Describe(spec.Plugins.List())); err != nil {
		return nil, err
	}
	if err := cl.shutdown(); err != nil {
		return res, fmt.Errorf("tear down cell: %w", err)
	}
	return res, nil
}

// PrimeTopic receives the one message each run appends before measuring.
const PrimeTopic = "BenchPrime"

// prime appends one message to PrimeTopic, flushes it and, with
// replication, waits until the slave has it.
func prime(ctx context.Context, store *core.Store, sh *storehost.Host, replicated bool) error {
	r, err := store.Append(benchMessage(PrimeTopic, 0, []byte("prime")))
	if err != nil {
		return fmt.Errorf("prime the store: %w", err)
	}
	if _, err := store.Flush(); err != nil {
		return fmt.Errorf("prime the store: flush: %w", err)
	}
	if replicated {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := sh.WaitReplicated(wctx, r.End()); err != nil {
			return fmt.Errorf("prime the store: wait for the slave: %w", err)
		}
	}
	return nil
}
