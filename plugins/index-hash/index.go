package indexhash

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/metricset"
)

// Option configures an Index at construction.
type Option func(*options)

type options struct {
	fs  vfs.FS
	log *slog.Logger
	now func() time.Time
}

// WithFS sets the filesystem the index files live on; default vfs.OS.
// Tests pass a vfs.NewCrashFS.
func WithFS(fsys vfs.FS) Option { return func(o *options) { o.fs = fsys } }

// WithLogger sets the logger; default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the clock that names new index files; default time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

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

// ---------------------------------------------------------------- open

// open opens dir, recovering it when the last run did not stop cleanly.
func (x *Index) open(dir string, cfg Config) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateNew {
		return fmt.Errorf("index-hash: configure: already configured: %w", sdk.ErrInvalidConfig)
	}
	x.cfg, x.dir = cfg, dir
	if err := x.recover(); err != nil {
		for _, f := range x.files {
			f.close()
		}
		x.files = nil
		if x.ckw != nil {
			x.ckw.f.Close()
			x.ckw = nil
		}
		return err
	}
	x.state.Store(stateOpen)
	return nil
}

// recover loads the directory. Callers hold syncMu and mu.
func (x *Index) recover() error {
	fsys, log := x.o.fs, x.o.log
	if _, err := fsys.Stat(x.dir); errors.Is(err, fs.ErrNotExist) {
		if err := fsys.MkdirAll(x.dir, 0o755); err != nil {
			return fmt.Errorf("index-hash: create %s: %w", x.dir, err)
		}
		if err := fsys.SyncDir(filepath.Dir(x.dir)); err != nil {
			return fmt.Errorf("index-hash: sync the parent of %s: %w", x.dir, err)
		}
	}
	ckPath := filepath.Join(x.dir, CheckpointFile)
	ck, exists, ckErr := readCheckpoint(fsys, ckPath)
	if ckErr != nil && !exists {
		return fmt.Errorf("index-hash: %w", ckErr)
	}
	names, err := fsys.ReadDir(x.dir)
	if err != nil {
		return fmt.Errorf("index-hash: list %s: %w", x.dir, err)
	}
	var created []int64
	for _, n := range names {
		if ms, ok := parseFileName(n); ok {
			created = append(created, ms)
			x.lastName = max(x.lastName, ms)
		}
	}
	slices.Sort(created)
	reset := func(why string) error {
		x.st.resets.Add(1)
		log.Error("index-hash: discarding the index; records dispatched before now will not be found by key", "dir", x.dir, "reason", why)
		for _, f := range x.files {
			f.close()
		}
		x.files = nil
		for _, ms := range created {
			if err := fsys.Remove(filepath.Join(x.dir, fileName(ms))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("index-hash: remove %s: %w", fileName(ms), err)
			}
		}
		ck = checkpoint{slots: int32(x.cfg.HashSlots)}
		return nil
	}
	switch {
	case ckErr != nil: // exists but unreadable
		if err := reset(ckErr.Error()); err != nil {
			return err
		}
	case !exists:
		if len(created) > 0 {
			if err := reset("index files without a checkpoint"); err != nil {
				return err
			}
		}
		ck = checkpoint{slots: int32(x.cfg.HashSlots)}
	case ck.slots != int32(x.cfg.HashSlots):
		return fmt.Errorf("index-hash: %s was made with hash_slots = %d, the configuration says %d (hash_slots is fixed for an index directory): %w",
			x.dir, ck.slots, x.cfg.HashSlots, sdk.ErrInvalidConfig)
	default:
		if err := x.load(ck, created); err != nil {
			var fatal *fatalError
			if errors.As(err, &fatal) {
				return fatal.err
			}
			if err := reset(err.Error()); err != nil {
				return err
			}
		}
	}
	x.slots = ck.slots
	if len(x.files) == 0 {
		ck.hasFile, ck.lastFile, ck.h = false, 0, header{}
	}
	x.indexedEnd = ck.indexedEnd
	if err := fsys.SyncDir(x.dir); err != nil {
		return fmt.Errorf("index-hash: sync %s: %w", x.dir, err)
	}
	// The checkpoint is rewritten not clean before anything changes, so a
	// crash from here on recovers.
	var f vfs.File
	if exists {
		f, err = fsys.OpenReadWrite(ckPath)
	} else {
		f, err = fsys.Create(ckPath)
	}
	if err != nil {
		return fmt.Errorf("index-hash: open checkpoint for writing: %w", err)
	}
	x.ckw = &checkpointWriter{f: f, last: checkpoint{seq: ck.seq}}
	ck.clean = false
	ck.indexedEnd = x.indexedEnd
	if err := x.ckw.write(ck); err != nil {
		return fmt.Errorf("index-hash: %w", err)
	}
	if !exists {
		if err := fsys.SyncDir(x.dir); err != nil {
			return fmt.Errorf("index-hash: sync %s: %w", x.dir, err)
		}
	}
	x.durableEnd.Store(x.indexedEnd)
	return nil
}

// fatalError is a load error that must fail the open instead of resetting
// the index (a configuration mismatch).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

// load opens the files a valid checkpoint covers and deletes newer ones.
func (x *Index) load(ck checkpoint, created []int64) error {
	fsys := x.o.fs
	for _, ms := range created {
		if !ck.hasFile || ms > ck.lastFile {
			x.o.log.Info("index-hash: removing an index file newer than the checkpoint", "file", fileName(ms))
			if err := fsys.Remove(filepath.Join(x.dir, fileName(ms))); err != nil {
				return &fatalError{fmt.Errorf("index-hash: remove %s: %w", fileName(ms), err)}
			}
			continue
		}
		f, err := openFile(fsys, x.dir, fileName(ms), ck.slots)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			return err
		}
		x.files = append(x.files, f)
	}
	if !ck.hasFile {
		return nil
	}
	if len(x.files) == 0 || x.files[len(x.files)-1].created != ck.lastFile {
		return fmt.Errorf("the checkpoint's last file %s is missing", fileName(ck.lastFile))
	}
	for _, f := range x.files[:len(x.files)-1] {
		if err := f.validHeader(); err != nil {
			return err
		}
	}
	last := x.files[len(x.files)-1]
	if ck.h.count > last.entries {
		return fmt.Errorf("checkpoint count %d exceeds the %d entries of %s", ck.h.count, last.entries, last.path)
	}
	if ck.clean && last.h == ck.h {
		return nil
	}
	// Not stopped cleanly: the durable entries [1,count) are trusted, the
	// slot table and header are rebuilt from them.
	x.st.recoveries.Add(1)
	x.o.log.Info("index-hash: recovering after a crash", "file", last.path, "entries", ck.h.count-1, "indexed_end", ck.indexedEnd)
	last.h = ck.h
	last.rebuildSlots(ck.h.count)
	return nil
}

// ---------------------------------------------------------------- index

// keyHash is RocketMQ's IndexService key hash of topic#key: Java's
// String.hashCode, made non-negative (abs, with MinInt32 mapped to 0).
func keyHash(topic, key string) int32 {
	return absHash(hashContinue(hashContinue(hashContinue(0, topic), "#"), key))
}

func absHash(h int32) int32 {
	if h < 0 {
		h = -h
		if h < 0 {
			return 0
		}
	}
	return h
}

// hashContinue extends a Java String.hashCode over s (record.JavaHashCode
// of a concatenation, computed piecewise without building it).
func hashContinue(h int32, s string) int32 {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			// Rare: non-ASCII keys. JavaHashCode(s[i:]) contributes
			// h*31^units + hash(rest).
			rest := s[i:]
			n := 0
			for _, r := range rest {
				n++
				if r >= 0x10000 {
					n++
				}
			}
			p := int32(1)
			for range n {
				p *= 31
			}
			return h*p + record.JavaHashCode(rest)
		}
		h = 31*h + int32(s[i])
	}
	return h
}

// Index implements sdk.Indexer. For each record that is not a transaction
// rollback it adds its UNIQ_KEY and every key of its KEYS property as
// topic#key (RocketMQ IndexService.buildIndex). A record at an offset the
// index has already passed cuts the index back to that offset first (see
// the type's documentation), so re-dispatch never duplicates entries.
// batch is not retained. An error (disk full while creating a file, or a
// failed checkpoint write while cutting back) leaves the index holding a
// prefix of the batch; calling Index again with the same records repairs
// it.
func (x *Index) Index(ctx context.Context, batch []sdk.Record) error {
	if len(batch) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateOpen {
		return x.errState("index")
	}
	var topic string
	var th int32 // hash of topic + "#"
	for i := range batch {
		r := &batch[i]
		if x.seen(r.PhysOffset) {
			x.mu.Unlock()
			err := x.truncateTo(r.PhysOffset)
			x.mu.Lock()
			if err != nil {
				return err
			}
			if x.state.Load() != stateOpen {
				return x.errState("index")
			}
		}
		x.st.records.Add(1)
		if record.TransactionType(r.SysFlag) != record.SysFlagTransactionRollback {
			if i == 0 || r.Topic != topic {
				topic = r.Topic
				th = hashContinue(hashContinue(0, topic), "#")
			}
			if r.UniqKey != "" {
				if err := x.put(absHash(hashContinue(th, r.UniqKey)), r); err != nil {
					return err
				}
			}
			for k := range record.IndexKeys(r.Keys) {
				if err := x.put(absHash(hashContinue(th, k)), r); err != nil {
					return err
				}
			}
		} else {
			x.st.rollbacks.Add(1)
		}
		x.indexedEnd = r.PhysOffset + max(int64(r.Size), 1)
	}
	return nil
}

// seen reports whether the index has already passed offset off: it is
// below the end of the last record indexed, or not above the offset of
// the newest entry (a record whose keys were partly put before an error).
func (x *Index) seen(off int64) bool {
	if off < x.indexedEnd {
		return true
	}
	if n := len(x.files); n > 0 && !x.files[n-1].empty() && off <= x.files[n-1].h.endPhy {
		return true
	}
	return false
}

// put adds one key of r. Callers hold mu.
func (x *Index) put(hash int32, r *sdk.Record) error {
	f, err := x.writable()
	if err != nil {
		return err
	}
	f.put(hash, r.PhysOffset, r.StoreTimestamp)
	x.st.keys.Add(1)
	return nil
}

// writable returns the last file, creating one when there is none or it
// is full. Callers hold mu.
func (x *Index) writable() (*indexFile, error) {
	if n := len(x.files); n > 0 && !x.files[n-1].full() {
		return x.files[n-1], nil
	}
	created := max(x.o.now().UnixMilli(), x.lastName+1)
	f, err := createFile(x.o.fs, x.dir, created, x.slots, int32(x.cfg.EntriesPerFile))
	if err != nil {
		return nil, fmt.Errorf("index-hash: %w", err)
	}
	x.lastName = created
	x.files = append(x.files, f)
	x.dirDirty = true
	x.st.filesCreated.Add(1)
	return f, nil
}

// truncateTo cuts the index back to commitlog offset p: afterwards it
// holds exactly the entries of records below p. Callers hold neither lock.
func (x *Index) truncateTo(p int64) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateOpen {
		return x.errState("truncate")
	}
	return x.truncateLocked(p)
}

// reconcile cuts the index back to the end of the log when it holds
// entries at or beyond it: records the index saw before a crash or a
// truncation that the log no longer has, and that no re-dispatch will
// replace unless new records arrive there. The dispatcher never goes past
// the committed offset, so nothing the index holds beyond it is current.
func (x *Index) reconcile(ctx context.Context, host sdk.Host) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateOpen {
		return x.errState("reconcile")
	}
	p, err := host.Positions(ctx)
	if err != nil {
		return fmt.Errorf("index-hash: reconcile with the log: %w", err)
	}
	if !x.seen(p.Committed) {
		return nil
	}
	x.o.log.Info("index-hash: cutting back entries beyond the end of the log", "committed", p.Committed, "indexed_end", x.indexedEnd)
	return x.truncateLocked(p.Committed)
}

// truncateLocked is truncateTo with syncMu and mu held.
func (x *Index) truncateLocked(p int64) error {
	// keep is the number of files that keep entries; the last of them is
	// cut to k entries.
	keep := len(x.files)
	for keep > 0 && (x.files[keep-1].empty() || x.files[keep-1].h.beginPhy >= p) {
		keep--
	}
	var k int32 = 1
	if keep > 0 {
		k = x.files[keep-1].firstAtOrAbove(p)
	}
	if ck := x.ckw.last; p < ck.indexedEnd {
		// Lower the durable checkpoint first: what stays below p is
		// durable (it is below the old checkpoint), and after a crash the
		// files beyond are dropped and the slots rebuilt.
		nc := checkpoint{slots: x.slots, indexedEnd: p}
		if keep > 0 {
			f := x.files[keep-1]
			nc.hasFile, nc.lastFile, nc.h = true, f.created, f.headerAt(k)
			nc.h.usedSlots = 0
		}
		if err := x.ckw.write(nc); err != nil {
			return fmt.Errorf("index-hash: cut back to %d: %w", p, err)
		}
		x.durableEnd.Store(p)
	}
	var errs []error
	cut := int64(0)
	for _, f := range x.files[keep:] {
		cut += int64(f.h.count - 1)
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
		if err := x.o.fs.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("index-hash: remove %s: %w", f.path, err))
		}
		x.dirDirty = true
		x.st.filesDeleted.Add(1)
	}
	x.files = x.files[:keep]
	if keep > 0 {
		f := x.files[keep-1]
		cut += int64(f.h.count - k)
		f.truncate(k)
	}
	x.indexedEnd = p
	x.st.truncations.Add(1)
	x.st.truncatedKeys.Add(cut)
	x.o.log.Debug("index-hash: cut back", "offset", p, "entries", cut)
	return errors.Join(errs...)
}

// ---------------------------------------------------------------- sync

// Sync implements sdk.Indexer: it makes every record indexed before the
// call durable and records that in the checkpoint. It waits for disk I/O
// but blocks Index and Query only while it notes what to write. After an
// error nothing is known about what is durable beyond the previous Sync;
// a later Sync retries.
func (x *Index) Sync(ctx context.Context) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	if x.state.Load() != stateOpen {
		return x.errState("sync")
	}
	return x.syncHeld()
}

// syncHeld is Sync with syncMu held.
func (x *Index) syncHeld() error {
	x.mu.Lock()
	var dirty []*indexFile
	for _, f := range x.files {
		if f.dirty {
			dirty = append(dirty, f)
			f.dirty = false
		}
	}
	dirDirty := x.dirDirty
	x.dirDirty = false
	ck := checkpoint{slots: x.slots, indexedEnd: x.indexedEnd}
	for i := len(x.files) - 1; i >= 0; i-- {
		if f := x.files[i]; !f.empty() {
			ck.hasFile, ck.lastFile, ck.h = true, f.created, f.h
			break
		}
	}
	x.mu.Unlock()
	last := x.ckw.last
	last.seq = 0
	if len(dirty) == 0 && !dirDirty && last == ck {
		return nil
	}
	x.st.syncs.Add(1)
	fail := func(err error) error {
		x.st.syncFailures.Add(1)
		x.mu.Lock()
		for _, f := range dirty {
			f.dirty = true
		}
		x.dirDirty = x.dirDirty || dirDirty
		x.mu.Unlock()
		return err
	}
	for _, f := range dirty {
		if err := f.f.Datasync(); err != nil {
			return fail(fmt.Errorf("index-hash: sync %s: %w", f.path, err))
		}
	}
	if dirDirty {
		if err := x.o.fs.SyncDir(x.dir); err != nil {
			return fail(fmt.Errorf("index-hash: sync %s: %w", x.dir, err))
		}
	}
	if err := x.ckw.write(ck); err != nil {
		return fail(fmt.Errorf("index-hash: %w", err))
	}
	x.durableEnd.Store(ck.indexedEnd)
	return nil
}

// ---------------------------------------------------------------- query

// Query implements sdk.Indexer: the commitlog offsets of the entries for
// q.Topic#q.Key whose store time may lie in [q.Begin, q.End], newest
// first, at most min(q.Max, Config.MaxQuery) (q.Max <= 0 asks for none).
// q.End == 0 means no upper bound.
//
// Candidates, not answers: entries are compared by hash only, so the
// result may hold offsets of other keys; entries keep their time to the
// second (RocketMQ's timeDiff), so it may hold records up to 999 ms
// before q.Begin; the same offset comes twice when a record lists a key
// twice; and offsets may point below the commitlog minimum (records
// already deleted). The host filters all of these by reading the records
// (sdk.Indexer). What it does not do is miss a record: every indexed record of
// that key stored in [q.Begin, q.End] is returned unless Max offsets newer
// than it are. Like RocketMQ, the walk stops at entries older than
// q.Begin, which assumes store timestamps do not go backwards. An empty
// topic or key matches nothing.
func (x *Index) Query(ctx context.Context, q sdk.Query) ([]int64, error) {
	if q.Topic == "" || q.Key == "" || q.Max <= 0 {
		return nil, nil
	}
	limit := min(q.Max, x.cfg.MaxQuery)
	begin, end := q.Begin, q.End
	if end == 0 {
		end = math.MaxInt64
	}
	if end < begin {
		return nil, nil
	}
	h := keyHash(q.Topic, q.Key)
	x.st.queries.Add(1)
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.state.Load() != stateOpen {
		return nil, x.errState("query")
	}
	var out []int64
	for i := len(x.files) - 1; i >= 0 && len(out) < limit; i-- {
		f := x.files[i]
		if f.empty() {
			continue
		}
		if f.h.beginTs <= end {
			out = f.lookup(out, h, begin, end, limit)
		}
		if f.h.beginTs+999 < begin {
			break // older files hold only older seconds (RocketMQ stops at beginTs < begin)
		}
	}
	return out, nil
}

// ---------------------------------------------------------------- retention

// Clean deletes the index files whose every entry points below minOffset
// (RocketMQ: endPhyOffset < the commitlog minimum), oldest first, never the
// last file nor the one the durable checkpoint names (a later Clean after
// a Sync deletes it), and returns how many it deleted. The retention loop calls it
// with host.Positions().Min; it is safe to call at any time.
func (x *Index) Clean(minOffset int64) (int, error) {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.state.Load() != stateOpen {
		return 0, x.errState("clean")
	}
	n := 0
	var errs []error
	ck := x.ckw.last
	for len(x.files) > 1 && x.files[0].h.endPhy < minOffset {
		f := x.files[0]
		if ck.hasFile && f.created >= ck.lastFile {
			break // the checkpoint names it: kept until a Sync moves past it
		}
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
		if err := x.o.fs.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("index-hash: remove %s: %w", f.path, err))
		}
		x.files = x.files[1:]
		x.dirDirty = true
		x.st.filesDeleted.Add(1)
		n++
	}
	if n > 0 {
		x.o.log.Info("index-hash: deleted index files below the commitlog minimum", "files", n, "min_offset", minOffset)
	}
	return n, errors.Join(errs...)
}

func (x *Index) cleanLoop(every time.Duration) {
	defer x.loopWG.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if b := x.host.Load(); b != nil {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			p, err := b.h.Positions(ctx)
			if err == nil {
				_, err = x.Clean(p.Min)
			}
			if err == nil {
				err = x.reconcile(ctx, b.h)
			}
			cancel()
			if err != nil && x.state.Load() == stateOpen {
				x.st.cleanFailures.Add(1)
				x.o.log.Warn("index-hash: retention check failed", "err", err)
			}
		}
		select {
		case <-x.stop:
			return
		case <-t.C:
		}
	}
}

// ---------------------------------------------------------------- inspection

// Offsets reports the index's progress: every record below indexed has
// been indexed, and every record below durable is durably indexed.
func (x *Index) Offsets() (indexed, durable int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.indexedEnd, x.durableEnd.Load()
}

// FileInfo describes one index file.
type FileInfo struct {
	Name           string `json:"name"`
	Entries        int    `json:"entries"`  // keys held
	Capacity       int    `json:"capacity"` // keys it can hold
	UsedSlots      int    `json:"used_slots"`
	BeginTimestamp int64  `json:"begin_timestamp"`
	EndTimestamp   int64  `json:"end_timestamp"`
	BeginPhyOffset int64  `json:"begin_phy_offset"`
	EndPhyOffset   int64  `json:"end_phy_offset"`
}

// Files describes the index files, oldest first.
func (x *Index) Files() []FileInfo {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]FileInfo, 0, len(x.files))
	for _, f := range x.files {
		out = append(out, FileInfo{
			Name: f.name, Entries: int(f.h.count - 1), Capacity: int(f.entries - 1), UsedSlots: int(f.h.usedSlots),
			BeginTimestamp: f.h.beginTs, EndTimestamp: f.h.endTs, BeginPhyOffset: f.h.beginPhy, EndPhyOffset: f.h.endPhy,
		})
	}
	return out
}
