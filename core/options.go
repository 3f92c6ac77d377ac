package core

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/keelmq/keel/core/vfs"
)

// Defaults, matching Apache RocketMQ's MessageStoreConfig where one exists.
const (
	DefaultSegmentSize      = 1 << 30
	DefaultMaxMessageSize   = 4 << 20
	DefaultCQEntriesPerFile = 300000
	DefaultRetention        = 72 * time.Hour
	DefaultCheckpointEvery  = time.Second
	DefaultCleanEvery       = 10 * time.Second
	DefaultRecoveryTail     = 256 << 20
	DefaultStallTimeout     = 5 * time.Second
	// DefaultVerifyWindow is Options.VerifyWindow's default.
	DefaultVerifyWindow = 64 << 20
	// DefaultMaxDeletePerRun is RetentionOptions.MaxDeletePerRun's default.
	DefaultMaxDeletePerRun = 10
	// DefaultDeleteHour is the hour of day (RocketMQ deleteWhen "04") at
	// which expired segments are deleted when RetentionOptions.DeleteWhen
	// is empty.
	DefaultDeleteHour = 4
	// Disk usage ratios of RetentionOptions (RocketMQ
	// diskMaxUsedSpaceRatio, diskSpaceCleanForciblyRatio,
	// diskSpaceWarningLevelRatio).
	DefaultDiskMaxUsedRatio   = 0.75
	DefaultCleanForciblyRatio = 0.85
	DefaultWarningRatio       = 0.90
)

// Options configures a Store. The zero value of every field but Dir means
// its default.
type Options struct {
	// Dir is the store's root directory. Required.
	Dir string
	// FS is the filesystem; nil means vfs.OS.
	FS vfs.FS
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger

	// SegmentSize is the size of every commitlog segment file. Default 1 GiB.
	// It is fixed for the life of a store: opening with a different size
	// fails.
	SegmentSize int64
	// MaxMessageSize bounds a message body. Default 4 MiB.
	MaxMessageSize int
	// CQEntriesPerFile is the number of 20-byte entries per consume queue
	// file. Default 300000.
	CQEntriesPerFile int
	// CheckCRCOnRecover verifies body CRCs while recovering after a crash.
	// Default true; set DisableCRCOnRecover to turn it off.
	DisableCRCOnRecover bool

	// FlushInterval > 0 makes the store run its own minimal flush policy: a
	// background goroutine that flushes everything committed every
	// FlushInterval. Leave 0 when a flush strategy drives Flush.
	FlushInterval time.Duration
	// WriteBuffer > 0 sends appends into an in-memory ring of that many
	// bytes; Commit moves them into the segments (RocketMQ's transient
	// store pool). Readers, dispatch, replication and Flush see only
	// committed bytes, and bytes still in the ring are lost in a process
	// crash. It must hold at least two maximum-size messages.
	WriteBuffer int
	// CommitOnWait (with WriteBuffer) makes WaitCommitted wait for
	// appended bytes and commit them before it returns. A group-commit
	// flusher waiting for new data thus moves everything appended since
	// its last round into the segment file with one pwrite(2), then
	// fdatasyncs: appends only copy into memory and nobody stores through
	// the shared mapping. The host sets it when acks wait for fdatasync:
	// each fdatasync write-protects the dirty pages of a mapping (a TLB
	// shootdown on every CPU) and the next append faults them back in,
	// which cost sync flush about half its group-commit rate
	// (docs/performance.md). Bytes reach readers when someone waits: the
	// flush strategy, a replicator, or Close.
	CommitOnWait bool
	// VisibleAfterFlush limits dispatch (and so consumer visibility) to
	// flushed data, as RocketMQ does under SYNC_FLUSH.
	VisibleAfterFlush bool
	// Confirm, when set, further limits dispatch to Confirm.ConfirmOffset()
	// (for example to replicated data). Its owner calls Store.NotifyConfirm
	// when the value grows.
	Confirm ConfirmSource
	// Listeners receive every dispatched record after the consume queues,
	// in log order (indexers).
	Listeners []DispatchListener

	// VerifyWindow is how far below the durable checkpoint crash recovery
	// re-checks records (CRC, length, position), so damage to recently
	// flushed data is found and refused rather than served. Recovery cost
	// is this window plus the unflushed tail, whatever the store's size.
	// Default 64 MiB (DefaultVerifyWindow).
	VerifyWindow int64

	// CheckpointEvery is how often consume queues are flushed and the
	// checkpoint written when the tail bound does not ask for one sooner.
	// Default 1 s.
	CheckpointEvery time.Duration

	// RecoveryTail bounds what crash recovery re-reads: how far the
	// committed offset may run ahead of the durable checkpoint's flushed
	// offset, and the confirmed offset ahead of its dispatched offset. The
	// store flushes and checkpoints behind the writer on its own at a
	// quarter of it, and stalls appends at the whole of it (tail.go).
	// Default 256 MiB (DefaultRecoveryTail); negative turns the bound off:
	// recovery then re-reads whatever the flush strategy and the
	// checkpoint interval left behind.
	RecoveryTail int64
	// StallTimeout is how long an append waits in a write stall before it
	// fails with ErrBusy. Default 5 s (DefaultStallTimeout).
	StallTimeout time.Duration

	// Retention configures segment deletion; see RetentionOptions.
	Retention RetentionOptions

	// OnFlush, if set, is called after every successful Flush that synced
	// something, with its duration and the bytes it made durable (metrics).
	// It runs on the flushing goroutine and must be quick.
	OnFlush func(d time.Duration, bytes int64)

	// Now returns the store clock in Unix milliseconds; nil means the
	// system clock. Tests use it.
	Now func() int64
}

// RetentionOptions configures deletion of old segments, RocketMQ-style.
type RetentionOptions struct {
	// FileReservedTime is how long a segment is kept after its last write.
	// Default 72 h. Negative disables deletion by age.
	FileReservedTime time.Duration
	// DeleteWhen lists the hours of the day (0-23) at which expired
	// segments are deleted. Empty means 04 (RocketMQ's "04").
	DeleteWhen []int
	// DiskMaxUsedRatio: above it, expired segments are deleted at any hour.
	// Default 0.75.
	DiskMaxUsedRatio float64
	// CleanForciblyRatio: above it, the oldest segments are deleted even if
	// not expired. Default 0.85.
	CleanForciblyRatio float64
	// WarningRatio: above it, appends are refused with ErrDiskFull until
	// usage drops below CleanForciblyRatio. Default 0.90.
	WarningRatio float64
	// CleanEvery is how often the retention check runs. Default 10 s.
	CleanEvery time.Duration
	// MaxDeletePerRun bounds deletions per check. Default 10
	// (DefaultMaxDeletePerRun).
	MaxDeletePerRun int
}

// ConfirmSource supplies the confirm offset: how far the dispatcher may make
// the log visible. It must be safe to call from the dispatcher goroutine and
// never decrease.
type ConfirmSource interface {
	ConfirmOffset() int64
}

// DispatchRecord is what dispatch listeners receive for each record.
type DispatchRecord struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhysOffset     int64
	Size           int32
	TagsCode       int64
	StoreTimestamp int64
	SysFlag        int32
	// Keys is the raw KEYS property (space separated), UniqKey the
	// UNIQ_KEY property; both may be empty.
	Keys    string
	UniqKey string
}

// DispatchListener receives dispatched records (an indexer).
//
// Dispatch is called only by the store's dispatcher goroutine, in log
// order, with batches that never overlap except after a crash, when records
// after the last checkpoint are dispatched again: implementations must be
// idempotent for records they have already seen. An error stops dispatch
// to every consumer until a retry succeeds (retried after 100 ms, the delay
// doubling to 2 s while it keeps failing) and is logged (when it first
// happens or changes, then every 30 s). The batch is valid only during the call: the store reuses
// its memory for the next one.
//
// Sync must make everything dispatched so far durable. It is called by the
// checkpointer, concurrently with Dispatch; after it returns nil the store
// may record in its checkpoint that records before the dispatched offset
// need not be dispatched again.
type DispatchListener interface {
	Dispatch(batch []DispatchRecord) error
	Sync() error
}

// Errors returned by the store. Test with errors.Is.
var (
	// ErrDiskFull: the disk is above the warning ratio or an allocation
	// failed for lack of space. Nothing was written; reads keep working and
	// appends resume when space returns.
	ErrDiskFull = errors.New("disk full")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store closed")
	// ErrReadOnly: a previous I/O error (a failed fsync) made the store
	// refuse writes until it is reopened.
	ErrReadOnly = errors.New("store is read-only after an I/O error")
	// ErrCorrupt: a record below the durable checkpoint is damaged. The
	// error names the segment file and offset; `keel store repair` cuts the
	// log there explicitly.
	ErrCorrupt = errors.New("commitlog corrupt below the durable checkpoint")
	// ErrOffset: a physical offset outside the log or not on a record
	// boundary.
	ErrOffset = errors.New("offset out of range")
	// ErrMessage: the message is invalid (too large, bad topic, properties
	// too long); the wrapped error from core/record says which.
	ErrMessage = errors.New("invalid message")
	// ErrBusy: an append waited Options.StallTimeout in a write stall (the disk or
	// the dispatcher is behind the writer by Options.RecoveryTail) and was
	// not written. Retry later.
	ErrBusy = errors.New("store busy")
)

// ErrSizeMismatch: the record a consume queue entry points at does not
// have the entry's size (a stale entry, or a damaged TOTALSIZE). It is
// also an ErrOffset.
var ErrSizeMismatch = errors.New("record size disagrees with its consume queue entry")

// errSizeMismatch is ErrSizeMismatch that is also ErrOffset.
var errSizeMismatch = fmt.Errorf("%w: %w", ErrSizeMismatch, ErrOffset)

// ReadError is a GetMessages read that failed at one consume queue entry:
// which entry, and why (Err).
type ReadError struct {
	Topic       string
	QueueID     int32
	QueueOffset int64
	PhysOffset  int64 // the commitlog offset the entry points at
	Err         error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("read message %s/%d@%d at %d: %v", e.Topic, e.QueueID, e.QueueOffset, e.PhysOffset, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// CorruptError describes corruption found below the durable checkpoint.
type CorruptError struct {
	File   string // segment file path
	Offset int64  // physical offset of the damaged record
	Reason error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("commitlog corrupt below the durable checkpoint: %s at offset %d: %v (run `keel store repair` to truncate explicitly)", e.File, e.Offset, e.Reason)
}

func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Reason} }

func (o *Options) withDefaults() (Options, error) {
	r := *o
	if r.Dir == "" {
		return r, errors.New("core: Options.Dir is required")
	}
	r.defaultEnvironment()
	r.defaultLayout()
	r.defaultRecovery()
	r.Retention.withDefaults()
	if err := r.validateLayout(); err != nil {
		return r, err
	}
	if err := r.Retention.validate(); err != nil {
		return r, err
	}
	return r, nil
}

// orDefault sets *v to def if *v is its type's zero value, the "zero means
// default" rule of Options.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// defaultEnvironment fills in what the store runs on: the filesystem, the
// logger and the clock.
func (o *Options) defaultEnvironment() {
	orDefault(&o.FS, vfs.OS)
	orDefault(&o.Logger, slog.Default())
	if o.Now == nil {
		o.Now = func() int64 { return time.Now().UnixMilli() }
	}
}

// defaultLayout fills in the sizes fixed on disk: segments, messages and
// consume queue files.
func (o *Options) defaultLayout() {
	orDefault(&o.SegmentSize, DefaultSegmentSize)
	orDefault(&o.MaxMessageSize, DefaultMaxMessageSize)
	orDefault(&o.CQEntriesPerFile, DefaultCQEntriesPerFile)
}

// defaultRecovery fills in what bounds crash recovery: the verify window,
// the checkpoint interval and the recovery tail with its stall timeout.
func (o *Options) defaultRecovery() {
	orDefault(&o.VerifyWindow, DefaultVerifyWindow)
	orDefault(&o.CheckpointEvery, DefaultCheckpointEvery)
	orDefault(&o.RecoveryTail, DefaultRecoveryTail)
	orDefault(&o.StallTimeout, DefaultStallTimeout)
}

// validateLayout checks that a maximum-size message fits a segment and,
// with a write buffer, twice into the buffer.
func (o *Options) validateLayout() error {
	if o.SegmentSize < 4096 {
		return fmt.Errorf("core: segment size %d too small (min 4096)", o.SegmentSize)
	}
	if int64(o.MaxMessageSize)+4096 > o.SegmentSize {
		return fmt.Errorf("core: max message size %d does not fit a segment of %d bytes", o.MaxMessageSize, o.SegmentSize)
	}
	if o.CommitOnWait && o.WriteBuffer <= 0 {
		return errors.New("core: CommitOnWait needs a WriteBuffer")
	}
	if o.WriteBuffer > 0 && o.WriteBuffer < 2*(o.MaxMessageSize+4096) {
		return fmt.Errorf("core: write buffer of %d bytes is smaller than two maximum-size messages (%d)", o.WriteBuffer, 2*(o.MaxMessageSize+4096))
	}
	return nil
}

// withDefaults fills in the retention defaults.
func (ro *RetentionOptions) withDefaults() {
	orDefault(&ro.FileReservedTime, DefaultRetention)
	if len(ro.DeleteWhen) == 0 {
		ro.DeleteWhen = []int{DefaultDeleteHour}
	}
	orDefault(&ro.DiskMaxUsedRatio, DefaultDiskMaxUsedRatio)
	orDefault(&ro.CleanForciblyRatio, DefaultCleanForciblyRatio)
	orDefault(&ro.WarningRatio, DefaultWarningRatio)
	orDefault(&ro.CleanEvery, DefaultCleanEvery)
	orDefault(&ro.MaxDeletePerRun, DefaultMaxDeletePerRun)
}

// validate checks that the disk ratios are ordered.
func (ro *RetentionOptions) validate() error {
	if !(ro.DiskMaxUsedRatio <= ro.CleanForciblyRatio && ro.CleanForciblyRatio <= ro.WarningRatio && ro.WarningRatio <= 1) {
		return fmt.Errorf("core: retention ratios must satisfy max_used (%v) <= clean_forcibly (%v) <= warning (%v) <= 1",
			ro.DiskMaxUsedRatio, ro.CleanForciblyRatio, ro.WarningRatio)
	}
	return nil
}
