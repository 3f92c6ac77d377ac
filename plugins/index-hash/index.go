package indexhash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/metricset"
)

// Index states.
const (
	stateNew     int32 = iota // not configured
	stateOpen                 // configured, files open
	stateStopped              // Stop was called
)

// Index is the hash index: an sdk.Indexer (with sdk.StatusReporter and
// sdk.MetricsWriter) keeping RocketMQ IndexFiles in Config.DataDir.
//
// # Life cycle
//
// Configure decodes the configuration and opens (and, after a crash,
// recovers) the index directory, so that Index may be called before Start
// (the store's dispatcher starts when the store opens, before the host
// starts plugins). Start only starts the periodic retention check. Stop
// syncs, marks the directory clean and closes it.
//
// # Durability and re-indexing
//
// Sync makes everything indexed so far durable and records in the
// index's checkpoint the commitlog offset below which every record is
// indexed. Index is idempotent in a stronger sense than RocketMQ's skip
// rule: a record at an offset the index has already passed (a re-dispatch
// after a crash, or a log truncated by replication and written again)
// first cuts the index back to that offset, so the index always holds
// exactly the entries of the records it was given, once each, in log order
// — the state an index rebuilt from scratch over the same records has. When
// the cut goes below the durable checkpoint the checkpoint is lowered
// first, so a crash in the middle of it cannot resurrect cut entries.
//
// After a crash, opening deletes the files newer than the checkpoint's last
// file and rebuilds that file's slot table from its durable entries, so
// the state is exactly the one at the last Sync; the store's re-dispatch
// (which starts at or below that point) brings it up to date.
//
// # Concurrency
//
// Index is called by one goroutine (the dispatcher); Query, Sync, Clean,
// Status and WriteMetrics may run concurrently with it and each other.
// Queries wait only while a batch is being inserted, never for disk I/O.
type Index struct {
	o   options
	cfg Config
	dir string

	state atomic.Int32

	// syncMu serializes what does I/O on the set of files (Sync,
	// truncation, retention, Stop); it is taken before mu.
	syncMu sync.Mutex
	ckw    *checkpointWriter // under syncMu

	mu         sync.RWMutex
	files      []*indexFile // oldest first; under mu
	slots      int32
	indexedEnd int64 // every record below is indexed; under mu
	lastName   int64 // newest file creation time handed out; under mu
	dirDirty   bool  // files created or removed since the last Sync; under mu

	durableEnd atomic.Int64 // indexedEnd of the last durable checkpoint

	host   atomic.Pointer[hostBox]
	stop   chan struct{}
	loopWG sync.WaitGroup

	st      stats
	metrics *metricset.Set
}

type hostBox struct{ h sdk.Host }

// stats are the counters Status and WriteMetrics report.
type stats struct {
	records, keys, rollbacks     atomic.Int64
	truncations, truncatedKeys   atomic.Int64
	filesCreated, filesDeleted   atomic.Int64
	queries, syncs, syncFailures atomic.Int64
	resets, recoveries           atomic.Int64
	cleanFailures                atomic.Int64
}

var (
	_ sdk.Indexer        = (*Index)(nil)
	_ sdk.StatusReporter = (*Index)(nil)
	_ sdk.MetricsWriter  = (*Index)(nil)
)

// New returns an unconfigured hash index as an sdk.Indexer, for the host's
// builtin catalog. See NewIndex.
func New(opts ...Option) sdk.Indexer { return NewIndex(opts...) }

// NewIndex returns an unconfigured hash index. Configure must be called
// before any other method.
func NewIndex(opts ...Option) *Index {
	o := options{fs: vfs.OS, log: slog.Default(), now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	x := &Index{o: o, stop: make(chan struct{})}
	x.metrics = newMetrics(x)
	return x
}

// Open returns an index over dir with configuration cfg (validated),
// opened as Configure opens it. Offline tools and tests use it instead of
// Configure.
func Open(dir string, cfg Config, opts ...Option) (*Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	x := NewIndex(opts...)
	if err := x.open(dir, cfg); err != nil {
		return nil, err
	}
	return x, nil
}

// Configure implements sdk.Plugin: it decodes cfg's [<section>.config]
// table strictly (DecodeConfig; errors wrap sdk.ErrInvalidConfig and give
// file:line:col) and opens cfg.DataDir, recovering it after a crash.
// Opening fails with sdk.ErrInvalidConfig when the directory's files were
// made with another hash_slots, and with an I/O error otherwise. It must
// be called once, before every other method.
func (x *Index) Configure(ctx context.Context, cfg sdk.Config) error {
	c, err := DecodeConfig(cfg)
	if err != nil {
		return err
	}
	if cfg.DataDir == "" {
		return fmt.Errorf("index-hash: no data directory given: %w", sdk.ErrInvalidConfig)
	}
	return x.open(cfg.DataDir, c)
}

// CheckConfig is Configure for `keel profile check` (the host's optional
// ConfigChecker): it decodes and validates cfg as Configure does and, when
// cfg.DataDir holds an index, reads its checkpoint to refuse a hash_slots
// it was not made with, but neither creates, writes nor recovers anything.
// The index stays unconfigured.
func (x *Index) CheckConfig(ctx context.Context, cfg sdk.Config) error {
	c, err := DecodeConfig(cfg)
	if err != nil || cfg.DataDir == "" {
		return err
	}
	ck, exists, err := readCheckpoint(x.o.fs, filepath.Join(cfg.DataDir, CheckpointFile))
	if err == nil && exists && ck.slots != int32(c.HashSlots) {
		return fmt.Errorf("index-hash: %s was made with hash_slots = %d, the configuration says %d (hash_slots is fixed for an index directory): %w",
			cfg.DataDir, ck.slots, c.HashSlots, sdk.ErrInvalidConfig)
	}
	return nil // an unreadable checkpoint is Configure's to recover from
}

// Config returns the configuration in effect.
func (x *Index) Config() Config { return x.cfg }

// Dir returns the index directory.
func (x *Index) Dir() string { return x.dir }

// Start implements sdk.Plugin. It cuts the index back to the end of the
// log if it holds entries beyond it (records lost in a crash or cut by a
// truncation, which no re-dispatch replaces when nothing new is written
// there), then starts the retention check, which every
// Config.CleanInterval deletes the files whose records are all below the
// commitlog minimum (host.Positions().Min) and repeats that cut. host
// stays in use until Stop.
func (x *Index) Start(ctx context.Context, host sdk.Host) error {
	if x.state.Load() != stateOpen {
		return fmt.Errorf("index-hash: start: not configured or stopped: %w", sdk.ErrUnavailable)
	}
	if host == nil {
		return fmt.Errorf("index-hash: start: no host: %w", sdk.ErrInvalidConfig)
	}
	x.host.Store(&hostBox{host})
	if err := x.reconcile(ctx, host); err != nil {
		return err
	}
	if x.cfg.CleanInterval > 0 {
		x.loopWG.Add(1)
		go x.cleanLoop(time.Duration(x.cfg.CleanInterval))
	}
	return nil
}

// Stop implements sdk.Plugin: it stops the retention check, syncs, marks
// the checkpoint clean (so the next open skips recovery) and closes the
// files. Index, Query and Sync fail with sdk.ErrUnavailable afterwards, so
// the host stops dispatch (closes the store) first. Calling Stop again
// returns nil. If the sync fails the checkpoint stays not clean and the
// next open recovers.
func (x *Index) Stop(ctx context.Context) error {
	prev := x.state.Swap(stateStopped)
	if prev == stateStopped {
		return nil
	}
	close(x.stop)
	x.loopWG.Wait()
	if prev != stateOpen {
		return nil
	}
	// An Index batch in flight finishes before syncHeld takes mu; later
	// ones see the stopped state.
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	for _, f := range x.files {
		f.spill() // the clean checkpoint below makes recovery trust the tables on disk
	}
	x.mu.Unlock()
	var errs []error
	if err := x.syncHeld(); err != nil {
		errs = append(errs, err)
	} else {
		c := x.ckw.last
		c.clean = true
		if err := x.ckw.write(c); err != nil {
			errs = append(errs, err)
		}
	}
	x.mu.Lock()
	for _, f := range x.files {
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
	}
	x.files = nil
	x.mu.Unlock()
	if err := x.ckw.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close index checkpoint: %w", err))
	}
	return errors.Join(errs...)
}

// errState is the error of a method called outside the open state.
func (x *Index) errState(op string) error {
	if x.state.Load() == stateNew {
		return fmt.Errorf("index-hash: %s: not configured: %w", op, sdk.ErrUnavailable)
	}
	return fmt.Errorf("index-hash: %s: stopped: %w", op, sdk.ErrUnavailable)
}
