// Package core is keel's fixed commitlog core: preallocated segment files of
// RocketMQ v1 records, consume queues built by a dispatcher, metadata, the
// epoch history, checkpoint-based crash recovery and retention. It has no
// network and no plugins inside; flush strategies, replicators and indexers
// drive it through the methods documented here (sdk/ wraps them for
// plugins).
//
// # Positions
//
// Every store tracks, in physical commitlog offsets:
//
//	min <= dispatched <= confirm <= committed <= wrote
//	flushed <= committed
//
// wrote is where the next append goes; committed is what readers,
// replication and dispatch may see (in this implementation appends copy
// straight into the mapped segment, so committed == wrote once an append
// returns); flushed is durable on this machine; confirm is what the
// durability policy allows consumers to see (committed, flushed, or what a
// ConfirmSource such as a sync replicator says); dispatched is how far the
// consume queues and listeners have been fed.
//
// # Concurrency
//
// All exported methods are safe for concurrent use. Appends serialise on
// one lock, inside which only offsets are assigned and bytes copied:
// encoding happens before it.
package core

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
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
	wroteN      notifier        // appends into the write buffer (CommitOnWait)
	flushWait   offwait.Waiters // WaitFlushed callers, by offset
	dispatchedN notifier
	confirmN    notifier

	flushMu       sync.Mutex
	dispatchMu    sync.Mutex       // held by the dispatcher per pass; Truncate takes it
	dispatchBuf   []DispatchRecord // the listeners' batch, reused; under dispatchMu
	dispatchCheck record.Checker   // interns topic names across passes; under dispatchMu
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

// RecoveryInfo describes what Open did.
type RecoveryInfo struct {
	Crashed       bool          // the abort marker was present
	ScanFrom      int64         // where validation started
	End           int64         // the recovered end of the log
	Truncated     int64         // bytes cut from a torn tail (upper bound: to the end of the segment)
	Redispatch    int64         // bytes to dispatch again
	Duration      time.Duration // time spent in Open
	HadCheckpoint bool
	// Phases is where Open's time went, in order: segments (open the
	// commitlog files), queues (open the consume queues), scan (validate
	// records from ScanFrom), cut (remove what follows the end),
	// truncate-queues, finish (epochs, abort marker, first checkpoint).
	Phases []RecoveryPhase
}

func (r RecoveryInfo) phaseString() string {
	var b strings.Builder
	for i, p := range r.Phases {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", p.Name, p.Took.Round(time.Microsecond))
	}
	return b.String()
}

// RecoveryPhase is one step of Open and its duration.
type RecoveryPhase struct {
	Name string
	Took time.Duration
}

// Positions is a snapshot of the store's offsets (physical commitlog byte
// offsets) and its epoch. It is the one positions type: the sdk names it
// sdk.Positions for plugins. Each field is read atomically but the snapshot
// as a whole is not, so a concurrent writer may move a later-read field
// past an earlier one; what always holds is
// Min <= Dispatched <= Confirm <= Committed <= Wrote and Flushed <= Committed.
type Positions struct {
	Min        int64 // oldest byte still stored
	Dispatched int64 // consume queues and indexers have seen records below
	Confirm    int64 // what consumers may see
	Flushed    int64 // durable on this machine
	Committed  int64 // readable and replicable
	Wrote      int64 // written, perhaps still in a write buffer (>= Committed)
	Epoch      int32 // the current epoch (0 before the first)
}

// AppendResult is where a record was stored.
type AppendResult struct {
	PhysOffset     int64
	Size           int32
	QueueOffset    int64
	StoreTimestamp int64
}

// End is the offset just past the record: an ack waits until flushed or
// replicated offsets reach it.
func (r AppendResult) End() int64 { return r.PhysOffset + int64(r.Size) }

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
	s.recovery.Duration = time.Since(start)
	s.log.Info("store opened", "dir", s.dir, "crashed", s.recovery.Crashed, "min", s.minOffset.Load(),
		"end", s.recovery.End, "scan_from", s.recovery.ScanFrom, "redispatch_bytes", s.recovery.Redispatch,
		"took", s.recovery.Duration, "phases", s.recovery.phaseString())
	s.startLoops()
	return s, nil
}

// Recovery reports what Open found and did.
func (s *Store) Recovery() RecoveryInfo { return s.recovery }

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

// Writable reports why appends would fail right now, or nil: ErrClosed,
// ErrReadOnly, or ErrDiskFull (usage at or above the warning ratio, as of
// a reading at most diskCheckEvery or diskCheckBytes of appends old).
func (s *Store) Writable() error {
	switch {
	case s.closed.Load():
		return ErrClosed
	case s.readOnly.Load():
		return ErrReadOnly
	case s.recheckDisk():
		return fmt.Errorf("appends refused above %.0f%% disk usage: %w", s.opts.Retention.WarningRatio*100, ErrDiskFull)
	}
	return nil
}

// How stale the disk usage reading behind Writable may be: the retention
// loop re-reads it every diskCheckEvery, and an append re-reads it after
// diskCheckBytes of appends since the last reading (a reading only from the
// 10 s retention pass let appends run on above the warning ratio that
// long; statfs on every append would cost the append path).
const (
	diskCheckEvery = 250 * time.Millisecond
	diskCheckBytes = 64 << 20
)

// recheckDisk re-reads disk usage once diskCheckBytes have been committed
// since the last reading (two atomic loads otherwise) and reports whether
// the disk is full.
func (s *Store) recheckDisk() bool {
	c := s.committed.Load()
	if at := s.diskCheckAt.Load(); c-at >= diskCheckBytes && s.diskCheckAt.CompareAndSwap(at, c) {
		s.checkDisk()
	}
	return s.diskFull.Load()
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

// ---------------------------------------------------------------- append

var encPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Append stores one message. See AppendBatch.
func (s *Store) Append(m *record.Message) (AppendResult, error) {
	var one [1]AppendResult
	res, err := s.AppendBatch([]*record.Message{m}, one[:0])
	if err != nil {
		return AppendResult{}, err
	}
	return res[0], nil
}

// AppendBatch stores msgs contiguously in one segment and appends their
// results to dst. Either all are stored or none (errors: ErrMessage with the
// record package's reason, ErrDiskFull, ErrReadOnly, ErrClosed; with a
// write buffer also ErrMessage for a batch over half of it). On return the
// records are committed (readable, replicable) but not necessarily
// flushed: wait with WaitFlushed when the policy needs durability. With a
// write buffer they are only written: Commit, or under CommitOnWait a
// WaitCommitted, commits them.
func (s *Store) AppendBatch(msgs []*record.Message, dst []AppendResult) ([]AppendResult, error) {
	if len(msgs) == 0 {
		return dst, nil
	}
	bp := encPool.Get().(*[]byte)
	defer encPool.Put(bp)
	buf := (*bp)[:0]
	lim := record.Limits{MaxMessageSize: s.opts.MaxMessageSize}
	base := len(dst)
	for _, m := range msgs {
		start := len(buf)
		var err error
		buf, err = record.Encode(buf, m, lim)
		if err != nil {
			return dst[:base], fmt.Errorf("append to %s: %w: %w", m.Topic, ErrMessage, err)
		}
		dst = append(dst, AppendResult{PhysOffset: int64(start), Size: int32(len(buf) - start)})
	}
	*bp = buf
	if int64(len(buf))+record.BlankSize > s.opts.SegmentSize {
		return dst[:base], fmt.Errorf("batch of %d bytes does not fit a segment: %w", len(buf), ErrMessage)
	}
	if s.wb != nil && 2*(int64(len(buf))+record.BlankSize) > int64(len(s.wb.ring)) {
		return dst[:base], fmt.Errorf("batch of %d bytes exceeds half the %d-byte write buffer: %w", len(buf), len(s.wb.ring), ErrMessage)
	}
	if err := s.Writable(); err != nil {
		return dst[:base], err
	}
	if err := s.awaitTailRoom(); err != nil {
		return dst[:base], err
	}

	s.appendMu.Lock()
	if s.closed.Load() {
		s.appendMu.Unlock()
		return dst[:base], ErrClosed
	}
	if err := s.ensureRoomLocked(int64(len(buf))); err != nil {
		s.appendMu.Unlock()
		return dst[:base], err
	}
	if s.wb != nil {
		if err := s.wbRoomLocked(int64(len(buf))); err != nil {
			s.appendMu.Unlock()
			return dst[:base], err
		}
	}
	now := s.opts.Now()
	pos := s.wrotePos
	for i, m := range msgs {
		r := &dst[base+i]
		rec := buf[r.PhysOffset : r.PhysOffset+int64(r.Size)]
		qo := int64(0)
		if countsInQueue(m.SysFlag) {
			k := queueKey{m.Topic, m.QueueID}
			qo = s.queueOffsets[k]
			s.queueOffsets[k] = qo + 1
		}
		r.PhysOffset = pos + r.PhysOffset
		r.QueueOffset = qo
		r.StoreTimestamp = now
		record.Stamp(rec, qo, r.PhysOffset, now)
	}
	s.wrotePos = pos + int64(len(buf))
	s.lastTs.Store(now)
	if s.wb != nil {
		s.wbPutLocked(pos, buf, 0)
		s.wb.wrote.Store(s.wrotePos)
		s.appendMu.Unlock()
		s.wroteN.notify()
		return dst, nil
	}
	copy(s.active.data[pos-s.active.start:], buf)
	s.committed.Store(s.wrotePos)
	s.maybeWarmLocked()
	s.appendMu.Unlock()
	s.committedN.notify()
	s.afterCommit()
	return dst, nil
}

// countsInQueue reports whether a record gets a consume queue entry and a
// queue offset: transaction prepared and rollback records do not.
func countsInQueue(sysFlag int32) bool {
	t := record.TransactionType(sysFlag)
	return t != record.SysFlagTransactionPrepared && t != record.SysFlagTransactionRollback
}

// ensureRoomLocked makes the active segment able to take n more bytes plus
// a BLANK, rolling to the next segment (padding this one) when it cannot.
func (s *Store) ensureRoomLocked(n int64) error {
	if s.active != nil {
		rel := s.wrotePos - s.active.start
		if rel+n+record.BlankSize <= s.opts.SegmentSize {
			return nil
		}
	}
	if s.wb != nil && s.active != nil {
		// Room for the padding that closes the active segment.
		if err := s.wbRoomLocked(s.opts.SegmentSize - (s.wrotePos - s.active.start)); err != nil {
			return err
		}
	}
	var nextStart int64
	if s.active == nil {
		nextStart = s.wrotePos - s.wrotePos%s.opts.SegmentSize
	} else {
		nextStart = s.active.start + s.opts.SegmentSize
	}
	next, err := s.pre.take(nextStart)
	if err != nil {
		if errors.Is(err, vfs.ErrNoSpace) {
			return fmt.Errorf("roll to segment %d: %w: %w", nextStart, ErrDiskFull, err)
		}
		return fmt.Errorf("roll to segment %d: %w", nextStart, err)
	}
	if s.active != nil {
		if rel := s.wrotePos - s.active.start; rel < s.opts.SegmentSize {
			pad := s.opts.SegmentSize - rel
			if s.wb != nil {
				var hdr [record.BlankSize]byte
				record.PutBlank(hdr[:], int32(pad))
				s.wbPutLocked(s.wrotePos, hdr[:], int(pad)-record.BlankSize)
			} else {
				record.PutBlank(s.active.data[rel:], int32(pad))
			}
		}
		s.wrotePos = next.start
		if s.wb != nil {
			s.wb.wrote.Store(s.wrotePos)
		}
	}
	if s.wrotePos < next.start {
		s.wrotePos = next.start
	}
	s.addSegment(next)
	s.active = next
	s.pre.ahead(next.start + s.opts.SegmentSize)
	return nil
}

func (s *Store) addSegment(seg *segment) {
	old := *s.segs.Load()
	n := make([]*segment, len(old), len(old)+1)
	copy(n, old)
	n = append(n, seg)
	s.segs.Store(&n)
}

// preallocator creates the next segment in the background so a roll
// normally only swaps pointers.
type preallocator struct {
	s       *Store
	mu      sync.Mutex
	ready   *segment
	running bool
	wg      sync.WaitGroup
}

// take returns the segment starting at start, creating it synchronously if
// the background creation has not produced it.
func (p *preallocator) take(start int64) (*segment, error) {
	r := p.takeReady()
	if r != nil && r.start == start {
		return r, nil
	}
	if r != nil {
		r.remove(p.s.fs)
	}
	// A leftover file of that name (from a crash) is reused if it is whole.
	path := filepath.Join(p.s.cl, segmentName(start))
	if _, err := p.s.fs.Stat(path); err == nil {
		if seg, err := openSegment(p.s.fs, path, start, p.s.opts.SegmentSize); err == nil {
			return seg, nil
		}
		p.s.fs.Remove(path)
	}
	return createSegment(p.s.fs, p.s.cl, start, p.s.opts.SegmentSize)
}

// ahead starts creating the segment at start in the background.
func (p *preallocator) ahead(start int64) {
	p.mu.Lock()
	if p.running || (p.ready != nil && p.ready.start == start) || p.s.closed.Load() {
		p.mu.Unlock()
		return
	}
	p.running = true
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		seg, err := createSegment(p.s.fs, p.s.cl, start, p.s.opts.SegmentSize)
		p.mu.Lock()
		p.running = false
		if err != nil {
			p.mu.Unlock()
			p.s.log.Warn("preallocating next segment failed; will retry on roll", "start", start, "err", err)
			return
		}
		if p.ready != nil {
			p.ready.remove(p.s.fs)
		}
		p.ready = seg
		p.mu.Unlock()
	}()
}

// takeReady waits for a background creation to finish and takes the
// segment it produced, if any.
func (p *preallocator) takeReady() *segment {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.ready
	p.ready = nil
	return r
}

func (p *preallocator) discard() {
	if r := p.takeReady(); r != nil {
		r.close()
	}
}

// discardRemove drops the preallocated segment and deletes its file, for
// when the log moved back (truncation) and the file would leave a hole.
func (p *preallocator) discardRemove() error {
	r := p.takeReady()
	if r == nil {
		return nil
	}
	if err := r.remove(p.s.fs); err != nil {
		return err
	}
	return p.s.fs.SyncDir(p.s.cl)
}

// ---------------------------------------------------------------- flush

// Flush makes everything committed so far durable (fdatasync of the
// segments written since the last flush) and returns the flushed offset.
// Concurrent callers coalesce on one lock; a caller that arrives while a
// flush runs waits and then flushes what was committed meanwhile (group
// commit). An fsync error makes the store read-only (ErrReadOnly) until it
// is reopened: after a failed fsync the kernel may have dropped the dirty
// pages, so retrying cannot prove durability.
func (s *Store) Flush() (int64, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.readOnly.Load() {
		return s.flushed.Load(), ErrReadOnly
	}
	target := s.committed.Load()
	from := s.flushed.Load()
	if target <= from {
		return from, nil
	}
	ts := s.lastTs.Load()
	t0 := time.Now()
	for seg := s.segmentFor(from); seg != nil && seg.start < target; seg = s.segmentFor(seg.start + s.opts.SegmentSize) {
		if err := seg.sync(); err != nil {
			s.readOnly.Store(true)
			s.log.Error("flush failed; store is now read-only", "err", err)
			return from, fmt.Errorf("flush to %d: %w: %w", target, ErrReadOnly, err)
		}
	}
	s.flushed.Store(target)
	s.flushedTs.Store(ts)
	s.flushWait.Release(target)
	s.afterProgress()
	if s.opts.OnFlush != nil {
		s.opts.OnFlush(time.Since(t0), target-from)
	}
	if s.opts.VisibleAfterFlush {
		s.confirmN.notify()
	}
	return target, nil
}

// WaitFlushed blocks until the flushed offset reaches off or ctx ends. It
// does not flush by itself: a flush strategy must be running.
func (s *Store) WaitFlushed(ctx context.Context, off int64) error {
	reached := func() bool { return s.flushed.Load() >= off }
	switch err := s.flushWait.Wait(ctx, off, reached, s.stop); {
	case errors.Is(err, offwait.ErrStopped):
		if reached() {
			return nil
		}
		return ErrClosed
	case err != nil:
		return err
	case !reached() && s.closed.Load():
		return ErrClosed
	case !reached():
		return fmt.Errorf("wait for flush to %d: the log was truncated below it: %w", off, ErrOffset)
	}
	return nil
}

// OnFlushed calls fn(true) once the flushed offset reaches off, or
// fn(false) if timeout passes first, the log is truncated below off, or
// the store closes without flushing it. fn runs exactly once: at once on
// the caller's goroutine when off is already flushed, otherwise on the
// flushing (or timer) goroutine, so it must be quick and must not block.
// It is WaitFlushed without a goroutine parked per waiter; the host sends
// sync-flush acknowledgements with it.
func (s *Store) OnFlushed(off int64, timeout time.Duration, fn func(ok bool)) {
	s.flushWait.Notify(off, timeout, func() bool { return s.flushed.Load() >= off }, fn)
}

// WaitCommitted blocks until the committed offset exceeds after, and
// returns it. Flush strategies and replicators use it to learn of new data.
//
// With Options.CommitOnWait it waits for appended bytes instead and commits
// them (Commit) before returning, so the caller's wake-up moves everything
// buffered into the segment file with one write.
func (s *Store) WaitCommitted(ctx context.Context, after int64) (int64, error) {
	if s.wb != nil && s.opts.CommitOnWait {
		for {
			if err := waitFor(ctx, &s.wroteN, s.stop, func() bool { return s.wb.wrote.Load() > after || s.committed.Load() > after }); err != nil {
				return 0, err
			}
			c, err := s.Commit()
			if err != nil {
				return c, err
			}
			if c > after {
				return c, nil
			}
		}
	}
	var c int64
	err := waitFor(ctx, &s.committedN, s.stop, func() bool { c = s.committed.Load(); return c > after })
	return c, err
}

// WaitDispatched blocks until the dispatched offset exceeds after, and
// returns it. Long-polling pulls use it.
func (s *Store) WaitDispatched(ctx context.Context, after int64) (int64, error) {
	var d int64
	err := waitFor(ctx, &s.dispatchedN, s.stop, func() bool { d = s.dispatched.Load(); return d > after })
	return d, err
}

func waitFor(ctx context.Context, n *notifier, stop chan struct{}, cond func() bool) error {
	for {
		ch := n.wait()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			if cond() {
				return nil
			}
			return ErrClosed
		}
	}
}

// ---------------------------------------------------------------- loops

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

func (s *Store) flushLoop() {
	t := time.NewTicker(s.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.Flush(); err != nil && !errors.Is(err, ErrReadOnly) {
				s.log.Error("periodic flush", "err", err)
			}
		}
	}
}

func (s *Store) checkpointLoop() {
	t := time.NewTicker(s.opts.CheckpointEvery)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if err := s.Checkpoint(); err != nil {
				s.log.Error("checkpoint", "err", err)
			}
			n++
			if n%5 == 0 {
				if err := s.meta.PersistAll(); err != nil {
					s.log.Error("persist metadata", "err", err)
				}
			}
		}
	}
}

// Checkpoint flushes the consume queues and listeners and durably records
// the flushed and dispatched offsets, bounding the work of the next
// recovery.
func (s *Store) Checkpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	d := s.dispatched.Load()
	dts := s.dispatchTs.Load()
	var derr error
	if err := s.cqs.Flush(); err != nil {
		derr = fmt.Errorf("checkpoint: flush consume queues: %w", err)
	} else {
		for _, l := range s.opts.Listeners {
			if err := l.Sync(); err != nil {
				derr = fmt.Errorf("checkpoint: sync dispatch listener: %w", err)
				break
			}
		}
	}
	if derr != nil {
		// The queues or an indexer could not be made durable: the
		// dispatched offset stays where the last checkpoint put it, but
		// the flushed offset still moves, so a failing indexer stops
		// neither the commitlog's progress nor, through the recovery
		// tail, the appends.
		d, dts = s.ckpt.last.Dispatched, s.ckpt.last.LogicsTs
		msg := derr.Error()
		s.ckptFail.Store(&msg)
	} else if s.ckptFail.Load() != nil {
		s.ckptFail.Store(nil)
	}
	c := Checkpoint{
		Flushed:    s.flushed.Load(),
		Dispatched: d,
		Confirm:    s.confirmOffset(),
		Min:        s.minOffset.Load(),
		PhysTs:     s.flushedTs.Load(),
		LogicsTs:   dts,
	}
	c.VerifyFrom = s.verifyFromLocked(c.Flushed, c.Min)
	if c == (Checkpoint{Seq: c.Seq}) {
		return derr
	}
	if err := s.ckpt.write(c); err != nil {
		return errors.Join(derr, fmt.Errorf("checkpoint: %w", err))
	}
	s.recorded(c)
	return derr
}

// recorded publishes a checkpoint just written (ckptMu held, or Open).
func (s *Store) recorded(c Checkpoint) {
	s.ckptFlushed.Store(c.Flushed)
	s.ckptDispatched.Store(c.Dispatched)
	s.ckptN.notify()
}

// Close stops the background work, flushes everything, dispatches what the
// policy allows, writes a final checkpoint and removes the abort marker so
// the next Open reads only the tail.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	close(s.stop)
	s.dispatchedN.notify()
	s.wg.Wait()
	var errs []error
	s.Commit()
	if !s.readOnly.Load() {
		if _, err := s.Flush(); err != nil {
			errs = append(errs, err)
		}
	}
	s.flushWait.ReleaseAll() // OnFlushed callbacks beyond the last flush learn it will not come
	// Dispatch whatever is visible so queues are complete.
	for {
		n, err := s.dispatchOnce()
		if err != nil {
			errs = append(errs, err)
			break
		}
		if n == 0 {
			break
		}
	}
	if err := s.Checkpoint(); err != nil {
		errs = append(errs, err)
	}
	if err := s.meta.PersistAll(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && !s.readOnly.Load() {
		if err := s.fs.Remove(filepath.Join(s.dir, AbortFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove abort marker: %w", err))
		} else if err := s.fs.SyncDir(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("sync store dir: %w", err))
		}
	}
	s.discardPrealloc()
	if err := s.closeFiles(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Store) closeFiles() error {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	var errs []error
	for _, seg := range *s.segs.Load() {
		if err := seg.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cqs != nil {
		if err := s.cqs.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.ckpt != nil {
		if err := s.ckpt.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// listSegments returns the segment start offsets in dir, sorted, removing
// leftover temporary files.
func listSegments(fsys vfs.FS, dir string) ([]int64, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list commitlog %s: %w", dir, err)
	}
	var starts []int64
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				return nil, fmt.Errorf("remove leftover %s: %w", n, err)
			}
			continue
		}
		v, ok := parseSegmentName(n)
		if !ok {
			return nil, fmt.Errorf("commitlog %s: unexpected file %q (segments are named by 20-digit offsets)", dir, n)
		}
		starts = append(starts, v)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	return starts, nil
}

// abandon stops the store's goroutines without flushing, checkpointing or
// closing files cleanly, as a process crash would. Tests use it before a
// simulated power cut.
func (s *Store) abandon() {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	close(s.stop)
	s.wg.Wait()
	s.discardPrealloc()
	s.closeFiles()
}

// Commit moves write-buffered bytes (Options.WriteBuffer) into the segment
// files, makes them visible to readers, dispatch and replication, and
// returns the committed offset. Without a write buffer every append is
// committed when it returns and Commit only reports the offset.
func (s *Store) Commit() (int64, error) {
	if s.wb == nil {
		return s.committed.Load(), nil
	}
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	return s.commitWBLocked()
}

// DispatchSignal returns a channel closed at the next dispatch progress
// (or at Close). Long polling uses it to wake on new data without a
// goroutine per waiter; a wake-up may be spurious.
func (s *Store) DispatchSignal() <-chan struct{} {
	if s.closed.Load() {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.dispatchedN.wait()
}

// LastStoreTimestamp is the store timestamp of the last committed record
// (Unix ms), 0 if none.
func (s *Store) LastStoreTimestamp() int64 { return s.lastTs.Load() }

// DiskUsedRatio is the used fraction of the filesystem holding the store,
// or 0 if unknown.
func (s *Store) DiskUsedRatio() float64 {
	du, err := s.fs.DiskUsage(s.dir)
	if err != nil {
		return 0
	}
	return du.UsedRatio()
}

// verifyFromLocked records flushed in the history of checkpointed flush
// offsets (all record boundaries) and returns the newest of them that is at
// least VerifyWindow below flushed, or else the oldest one within
// 4×VerifyWindow of flushed (flushed itself at worst). ckptMu is held.
func (s *Store) verifyFromLocked(flushed, minOff int64) int64 {
	h := s.flushHist
	if n := len(h); n == 0 || h[n-1] != flushed {
		h = append(h, flushed)
	}
	// Drop history that is older than needed, and anything the log no
	// longer holds (retention) or that lies beyond it (truncation). An
	// entry more than 4 windows below flushed is dropped too: when flushes
	// are rare and large (async flush behind a big dirty backlog), the
	// previous checkpoint can be gigabytes back, and recovery must not
	// scan that far; the window is then empty until history builds up.
	i := 0
	for i < len(h) && (h[i] < minOff || h[i] > flushed || h[i] < flushed-4*s.opts.VerifyWindow) {
		i++
	}
	h = h[i:]
	for len(h) >= 2 && h[1] <= flushed-s.opts.VerifyWindow {
		h = h[1:]
	}
	s.flushHist = append(s.flushHist[:0], h...)
	if len(s.flushHist) == 0 {
		return max(minOff, flushed)
	}
	return s.flushHist[0]
}

// TruncateGeneration changes whenever Truncate rewrites the log's tail, so
// caches keyed by physical offset can tell a stale entry.
func (s *Store) TruncateGeneration() int64 { return s.truncGen.Load() }

// discardPrealloc drops the preallocated segment while no append runs (an
// append may be starting a background preallocation).
func (s *Store) discardPrealloc() {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.pre.discard()
}

// warmAhead is how far ahead of the write position the warmer prefaults.
const warmAhead = 4 << 20

// maybeWarmLocked asks the warmer to run when the write position gets
// within half the window of what is prefaulted. appendMu is held.
func (s *Store) maybeWarmLocked() {
	if s.noWarm.Load() || s.active == nil {
		return
	}
	if s.wrotePos-s.active.start+warmAhead/2 > s.active.warmed.Load() {
		select {
		case s.warmCh <- s.active:
		default: // a request is pending
		}
	}
}

func (s *Store) warmLoop() {
	for {
		select {
		case <-s.stop:
			return
		case r := <-s.writebackCh:
			r.seg.startWriteback(r.rel, r.n)
		case seg := <-s.warmCh:
			rel := s.wroteOffset() - seg.start
			if rel < 0 || rel >= s.opts.SegmentSize {
				continue
			}
			from := max(seg.warmed.Load(), rel)
			to := min(s.opts.SegmentSize, rel+warmAhead)
			if from >= to {
				continue
			}
			if !seg.warm(from, to) {
				s.noWarm.Store(true)
				s.log.Debug("mapping prefault not supported; appends fault pages in")
				continue
			}
			seg.warmed.Store(to)
		}
	}
}
