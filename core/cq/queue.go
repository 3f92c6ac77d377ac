package cq

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/keelmq/keel/core/vfs"
)

// Queue is the consume queue of one topic and queue id.
//
// Concurrency contract: Put is called by exactly one goroutine (the
// dispatcher). Get, At, Min, Max, MaxPhysOffset, FlushedOffset and
// SearchTime may be called concurrently with Put and with each other from
// any goroutine. Flush may be called from another goroutine concurrently
// with all of those. TruncatePhys and SetMinPhysOffset must not run
// concurrently with Put (pause dispatch first); they exclude readers and
// Flush with the queue's lock, so readers remain safe. Close must not run
// concurrently with Put.
type Queue struct {
	fs       vfs.FS
	log      *slog.Logger
	dir      string // root/topic/queueId
	topic    string
	id       int32
	epf      int64 // entries per file
	fileSize int64

	// mu: readers and Flush hold it shared while touching mappings;
	// TruncatePhys, SetMinPhysOffset and Close hold it exclusively while
	// unmapping or zeroing. Put does not take it.
	mu      sync.RWMutex
	flushMu sync.Mutex // serializes Flush calls

	files   atomic.Pointer[[]*qfile] // contiguous, ascending; replaced copy-on-write
	max     atomic.Int64             // next queue offset to write
	min     atomic.Int64             // first readable queue offset
	maxPhys atomic.Int64             // End() of the last real entry, 0 if none
	flushed atomic.Int64             // queue offset below which entries are durable
	closed  atomic.Bool

	dirDirty    atomic.Bool              // a file was created in dir since the last SyncDir
	parentSyncs atomic.Pointer[[]string] // directories whose new entries Flush must sync
}

// OpenQueue opens (or prepares, if it has no files yet) the queue of topic
// and queueID under the consume queue root dir, i.e. the files in
// dir/topic/queueID. Nothing is created on disk until the first Put. The
// error wraps ErrInvalidTopic, ErrInvalidQueueID, ErrCorrupt or the
// filesystem's error.
//
// It loads the existing files: sorted by name, each named by a 20-digit
// multiple of the file size and following the previous one without a gap
// (otherwise ErrCorrupt); a file larger than the configured size is
// ErrCorrupt; a shorter one (a crash before its size became durable) is
// extended with zeros; other names are ignored with a warning.
//
// It then recovers the write position as RocketMQ does: it scans from the
// third-last file (or the first short file, if earlier) to the first
// invalid unit (Offset < 0, Size <= 0, an End that overflows, a blank after
// a real entry, or a real entry whose commitlog offset goes below the
// previous entry's end), sets Max there, zeroes the rest of that file and
// removes the files after it. Older files are trusted, not re-validated. If
// no real entry remains, every file is removed and the queue is empty. Min
// is set to the first real entry and the flushed offset to the start of
// the scanned window (the next Flush syncs the recovered tail again).
//
// Torn writes: after a power cut, entries written after the last Flush may
// survive partially (4 KiB pages of them). Recovery cuts every unit that
// the rules above reject, but a unit in which only the tags code was torn
// looks valid. The caller must therefore, before dispatching again, call
// SetMinPhysOffset with the commitlog's minimum and TruncatePhys with the
// commitlog offset its re-dispatch starts from (at most the commitlog's
// valid end), so every entry that might be torn is rewritten from the
// commitlog.
func OpenQueue(opts Options, dir, topic string, queueID int32) (*Queue, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	if err := validateQueueID(queueID); err != nil {
		return nil, err
	}
	q := &Queue{
		fs:       opts.FS,
		log:      opts.Logger.With("topic", topic, "queue", queueID),
		dir:      filepath.Join(dir, topic, strconv.Itoa(int(queueID))),
		topic:    topic,
		id:       queueID,
		epf:      int64(opts.EntriesPerFile),
		fileSize: int64(opts.EntriesPerFile) * EntrySize,
	}
	empty := []*qfile{}
	q.files.Store(&empty)
	if err := q.load(); err != nil {
		return nil, fmt.Errorf("open consume queue %s/%d: %w", topic, queueID, err)
	}
	return q, nil
}

// Topic is the queue's topic.
func (q *Queue) Topic() string { return q.topic }

// QueueID is the queue's id.
func (q *Queue) QueueID() int32 { return q.id }

// Dir is the directory holding the queue's files.
func (q *Queue) Dir() string { return q.dir }

// Max is the next queue offset to be written: the number of entries in the
// queue's logical space including leading blanks and entries removed by
// retention. It is 0 for a queue with no files.
func (q *Queue) Max() int64 { return q.max.Load() }

// Min is the first readable queue offset: the first real (non-blank) entry
// whose commitlog offset is at or above the minimum last given to
// SetMinPhysOffset. Min() == Max() means nothing is readable. Min never
// exceeds Max.
func (q *Queue) Min() int64 {
	mx := q.max.Load()
	return min(q.min.Load(), mx)
}

// MaxPhysOffset is the commitlog offset just past the queue's last real
// entry (Offset+Size), or 0 if the queue holds no real entry. Put skips any
// entry that ends at or below it.
func (q *Queue) MaxPhysOffset() int64 { return q.maxPhys.Load() }

// FlushedOffset is the queue offset below which entries are known durable
// (covered by a successful Flush, or by recovery's own sync).
func (q *Queue) FlushedOffset() int64 { return q.flushed.Load() }
