package core

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core/cq"
	"github.com/keelmq/keel/core/epoch"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/internal/offwait"
)

// Layout inside Options.Dir.
const (
	CommitlogDir    = "commitlog"
	ConsumeQueueDir = "consumequeue"
	ConfigDir       = "config"
	CheckpointFile  = "checkpoint"
	AbortFile       = "abort"
	EpochFile       = "epochs"
)

type queueKey struct {
	topic string
	qid   int32
}

// Store is an open commitlog store.
type Store struct {
	opts Options
	fs   vfs.FS
	log  *slog.Logger
	dir  string
	cl   string // commitlog dir

	cqs    *cq.Set
	meta   *meta.Store
	epochs *epoch.History

	// appendMu serialises appends, raw appends, rolls and truncation.
	appendMu      sync.Mutex
	active        *segment           // guarded by appendMu
	wrotePos      int64              // guarded by appendMu
	writebackFrom int64              // AppendRaw: writeback started below this; guarded by appendMu
	queueOffsets  map[queueKey]int64 // guarded by appendMu
	segs          atomic.Pointer[[]*segment]

	pre preallocator
	// warmCh asks the warmer to prefault the active segment ahead of the
	// write position (RocketMQ's warmMappedFile idea): a store into a fresh
	// page of a mapping otherwise takes a page fault per 4 KiB on the
	// append path.
	warmCh chan *segment
	// writebackCh hands AppendRaw's writeback hints to the warmer's
	// goroutine, off the replica's append path.
	writebackCh chan writebackReq
	noWarm      atomic.Bool
	wb          *writeBuffer // nil unless Options.WriteBuffer > 0

	committed  atomic.Int64
	flushed    atomic.Int64
	dispatched atomic.Int64
	minOffset  atomic.Int64
	lastTs     atomic.Int64 // store timestamp of the last committed record
	flushedTs  atomic.Int64
	dispatchTs atomic.Int64

	committedN  notifier
	mirror      mirrors         // MirrorCommitted's functions
	wroteN      notifier        // appends into the write buffer (CommitOnWait)
	flushWait   offwait.Waiters // WaitFlushed callers, by offset
	dispatchedN notifier
	confirmN    notifier

	flushMu       sync.Mutex
	dispatchMu    sync.Mutex       // held by the dispatcher per pass; Truncate takes it
	dispatchBuf   []DispatchRecord // the listeners' batch, reused; under dispatchMu
	dispatchCheck record.Checker   // interns topic names across passes; under dispatchMu
	skippedTopics map[string]bool  // topics dispatch skipped, logged once each; under dispatchMu
	ckptMu        sync.Mutex
	ckpt          *checkpointFile
	flushHist     []int64 // flushed offsets of past checkpoints (ckptMu), for VerifyFrom

	// The durable checkpoint's flushed and dispatched offsets (tail.go).
	ckptFlushed    atomic.Int64
	ckptDispatched atomic.Int64
	ckptN          notifier      // notified after every checkpoint write
	tailCh         chan struct{} // wakes the tail keeper
	stallCount     atomic.Int64
	stallNanos     atomic.Int64
	stallTimeouts  atomic.Int64
	// openEnd is the log's end when Open finished: records recovered then
	// and not yet re-dispatched are not charged to later appends (tail.go).
	openEnd      atomic.Int64
	dispatchFail atomic.Pointer[string] // the dispatcher's last error, nil after a good pass
	ckptFail     atomic.Pointer[string] // why the last checkpoint could not record dispatch progress

	truncGen      atomic.Int64 // bumped by every Truncate (caches keyed by offset)
	diskFull      atomic.Bool
	diskCheckAt   atomic.Int64 // the committed offset at the last append-driven disk usage check
	diskUnknown   atomic.Bool  // the last disk usage reading failed (warned once)
	forcedDeletes atomic.Int64 // segments retention deleted before they expired
	readOnly      atomic.Bool
	closed        atomic.Bool

	stop chan struct{}
	wg   sync.WaitGroup

	// Recovery reports what Open found.
	recovery RecoveryInfo
}

// Positions is a snapshot of the store's offsets (physical commitlog byte
// offsets) and its epoch. It is the one positions type: the sdk names it
// sdk.Positions for plugins. Each field is read atomically but the snapshot
// as a whole is not, so a concurrent writer may move a later-read field
// past an earlier one; what always holds is Min <= Dispatched <= Committed
// <= Wrote, Confirm <= Committed and Flushed <= Committed. Dispatched <=
// Confirm holds too except after a restart whose confirm source starts
// lower than what was dispatched before it (the replicas' acknowledged
// offset is 0 until they report); dispatch then waits for confirm.
type Positions struct {
	Min        int64 // oldest byte still stored
	Dispatched int64 // consume queues and indexers have seen records below
	Confirm    int64 // what consumers may see
	Flushed    int64 // durable on this machine
	Committed  int64 // readable and replicable
	Wrote      int64 // written, perhaps still in a write buffer (>= Committed)
	Epoch      int32 // the current epoch (0 before the first)
}

// Open opens (creating if needed) the store in opts.Dir and recovers it.
// After a crash it validates records from the last durable checkpoint,
// truncates a torn tail and the consume queues to match; corruption below
// the checkpoint fails with a *CorruptError.
func Open(o Options) (*Store, error) {
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	s := &Store{
		opts:         opts,
		fs:           opts.FS,
		log:          opts.Logger.With("component", "store"),
		dir:          opts.Dir,
		cl:           filepath.Join(opts.Dir, CommitlogDir),
		queueOffsets: make(map[queueKey]int64),
		stop:         make(chan struct{}),
		warmCh:       make(chan *segment, 1),
		writebackCh:  make(chan writebackReq, 16),
		tailCh:       make(chan struct{}, 1),
	}
	s.pre.s = s
	s.dispatchCheck.Keys = len(opts.Listeners) > 0 // indexers need the keys; queues do not
	if opts.WriteBuffer > 0 {
		s.wb = &writeBuffer{ring: make([]byte, opts.WriteBuffer)}
	}
	empty := []*segment{}
	s.segs.Store(&empty)
	for _, d := range []string{s.dir, s.cl, filepath.Join(s.dir, ConsumeQueueDir), filepath.Join(s.dir, ConfigDir)} {
		if err := s.fs.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create store dir %s: %w", d, err)
		}
	}
	// Make the directories themselves durable: a power cut must not take
	// the store's directory entries away with synced files inside.
	for _, d := range []string{filepath.Dir(s.dir), s.dir} {
		if err := s.fs.SyncDir(d); err != nil {
			return nil, fmt.Errorf("sync store dir %s: %w", d, err)
		}
	}
	if err := s.recover(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if invariants {
		s.assertOrder("open")
	}
	s.recovery.Duration = time.Since(start)
	s.log.Info("store opened", "dir", s.dir, "crashed", s.recovery.Crashed, "min", s.minOffset.Load(),
		"end", s.recovery.End, "scan_from", s.recovery.ScanFrom, "redispatch_bytes", s.recovery.Redispatch,
		"took", s.recovery.Duration, "phases", s.recovery.phaseString())
	s.startLoops()
	return s, nil
}

// Meta is the store's metadata (topics, offsets, groups, delay offsets).
func (s *Store) Meta() *meta.Store { return s.meta }

// Epochs is the log's epoch history.
func (s *Store) Epochs() *epoch.History { return s.epochs }

// Dir is the store's root directory.
func (s *Store) Dir() string { return s.dir }

// SegmentSize is the fixed size of the commitlog segments.
func (s *Store) SegmentSize() int64 { return s.opts.SegmentSize }

// MaxMessageSize is the body limit.
func (s *Store) MaxMessageSize() int { return s.opts.MaxMessageSize }

// Positions returns a snapshot of the offsets. Fields are read one by one,
// so the invariants between them hold only approximately under load.
func (s *Store) Positions() Positions {
	return Positions{
		Min:        s.minOffset.Load(),
		Dispatched: s.dispatched.Load(),
		Confirm:    s.confirmOffset(),
		Flushed:    s.flushed.Load(),
		Committed:  s.committed.Load(),
		Wrote:      s.wroteOffset(),
		Epoch:      s.currentEpoch(),
	}
}

func (s *Store) currentEpoch() int32 {
	if s.epochs == nil {
		return 0 // still opening
	}
	if e, ok := s.epochs.Last(); ok {
		return e.Epoch
	}
	return 0
}

func (s *Store) wroteOffset() int64 {
	if s.wb != nil {
		return s.wb.wrote.Load()
	}
	return s.committed.Load()
}

func (s *Store) confirmOffset() int64 {
	c := s.committed.Load()
	if s.opts.VisibleAfterFlush {
		c = min(c, s.flushed.Load())
	}
	if s.opts.Confirm != nil {
		c = min(c, s.opts.Confirm.ConfirmOffset())
	}
	return c
}

// NotifyConfirm tells the dispatcher that the ConfirmSource's value grew.
func (s *Store) NotifyConfirm() { s.confirmN.notify() }

// segmentFor returns the segment holding physical offset off, or nil.
func (s *Store) segmentFor(off int64) *segment {
	segs := *s.segs.Load()
	if len(segs) == 0 || off < segs[0].start {
		return nil
	}
	i := (off - segs[0].start) / s.opts.SegmentSize
	if i >= int64(len(segs)) {
		return nil
	}
	return segs[i]
}

func (s *Store) startLoops() {
	s.goLoop(s.warmLoop)
	s.goLoop(s.dispatchLoop)
	s.goLoop(s.checkpointLoop)
	s.goLoop(s.retentionLoop)
	if s.opts.RecoveryTail > 0 {
		s.goLoop(s.tailLoop)
	}
	if s.opts.FlushInterval > 0 {
		s.goLoop(s.flushLoop)
	}
}

func (s *Store) goLoop(f func()) {
	s.wg.Add(1)
	go func() { defer s.wg.Done(); f() }()
}

// LastStoreTimestamp is the store timestamp of the last committed record
// (Unix ms), 0 if none.
func (s *Store) LastStoreTimestamp() int64 { return s.lastTs.Load() }

// TruncateGeneration changes whenever Truncate rewrites the log's tail, so
// caches keyed by physical offset can tell a stale entry.
func (s *Store) TruncateGeneration() int64 { return s.truncGen.Load() }
