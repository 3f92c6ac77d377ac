package cq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/keelmq/keel/core/vfs"
)

// EntrySize is the size in bytes of one consume queue entry.
const EntrySize = 20

// DefaultEntriesPerFile is the number of entries per file when
// Options.EntriesPerFile is zero (RocketMQ's mappedFileSizeConsumeQueue:
// 300000 entries, 6,000,000 bytes).
const DefaultEntriesPerFile = 300000

// MaxTopicLen is the longest topic name, in bytes, a queue accepts.
const MaxTopicLen = 127

// MaxQueueID is the largest queue id.
const MaxQueueID = 65535

// fileNameLen is the length of a queue file's name (a zero-padded decimal
// logical byte offset).
const fileNameLen = 20

// Errors returned (possibly wrapped) by this package. Check them with
// errors.Is.
var (
	// ErrQueueOffsetMismatch means Put was asked to write at a queue offset
	// other than the queue's next offset (and the entry was not an already
	// indexed one that could be skipped). The dispatcher and the queue
	// disagree about the queue's contents; the caller must not retry blindly.
	ErrQueueOffsetMismatch = errors.New("cq: queue offset mismatch")
	// ErrInvalidEntry means an entry given to Put is malformed (negative
	// offset, non-positive size, the reserved blank size) or its commitlog
	// offset goes backwards relative to the queue's last entry.
	ErrInvalidEntry = errors.New("cq: invalid entry")
	// ErrOffsetTooSmall means a read asked for a queue offset below Min():
	// the entry was removed by retention or was never stored here.
	ErrOffsetTooSmall = errors.New("cq: queue offset below minimum")
	// ErrOffsetOverflow means a read asked for a queue offset at or beyond
	// Max(): the entry has not been written (yet).
	ErrOffsetOverflow = errors.New("cq: queue offset beyond maximum")
	// ErrClosed means the queue or set was closed.
	ErrClosed = errors.New("cq: closed")
	// ErrInvalidTopic means a topic name cannot be used as a directory name.
	ErrInvalidTopic = errors.New("cq: invalid topic name")
	// ErrInvalidQueueID means a queue id is outside 0..MaxQueueID.
	ErrInvalidQueueID = errors.New("cq: invalid queue id")
	// ErrCorrupt means the files of a queue cannot be made sense of (a file
	// larger than the configured size, files that are not contiguous); the
	// queue is not opened and an operator (or a rebuild from the commitlog)
	// must intervene.
	ErrCorrupt = errors.New("cq: corrupt queue files")
)

// Entry is one consume queue entry.
type Entry struct {
	// Offset is the commitlog (physical) offset of the message record.
	Offset int64
	// Size is the size in bytes of the record in the commitlog.
	Size int32
	// TagsCode is the tag hash (or, for scheduled topics, the delivery
	// time) that lets consumers filter without reading the record.
	TagsCode int64
}

// blankSize is the size field of a blank unit (RocketMQ's fillPreBlank).
const blankSize = math.MaxInt32

// blankEntry is the unit written before a queue's first real entry.
var blankEntry = Entry{Offset: 0, Size: blankSize, TagsCode: 0}

// IsBlank reports whether e is a pre-fill blank unit rather than a message.
func (e Entry) IsBlank() bool { return e.Size == blankSize }

// End is the commitlog offset just past the entry's record.
func (e Entry) End() int64 { return e.Offset + int64(e.Size) }

// valid reports whether e is plausible as a stored unit (blank or real):
// RocketMQ's recovery rule (Offset >= 0, Size > 0) plus an End that does
// not overflow.
func (e Entry) valid() bool {
	return e.Offset >= 0 && e.Size > 0 && e.Offset <= math.MaxInt64-int64(e.Size)
}

func encodeEntry(b []byte, e Entry) {
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint64(b[0:8], uint64(e.Offset))
	binary.BigEndian.PutUint32(b[8:12], uint32(e.Size))
	binary.BigEndian.PutUint64(b[12:20], uint64(e.TagsCode))
}

func decodeEntry(b []byte) Entry {
	_ = b[EntrySize-1]
	return Entry{
		Offset:   int64(binary.BigEndian.Uint64(b[0:8])),
		Size:     int32(binary.BigEndian.Uint32(b[8:12])),
		TagsCode: int64(binary.BigEndian.Uint64(b[12:20])),
	}
}

// Options configure queues and sets.
type Options struct {
	// FS is the filesystem all files are accessed through. Required.
	FS vfs.FS
	// EntriesPerFile is the number of entries in each queue file; zero
	// means DefaultEntriesPerFile. It must not change between runs over the
	// same files (OpenQueue refuses files of another size).
	EntriesPerFile int
	// Logger receives recovery and maintenance messages; nil means
	// slog.Default().
	Logger *slog.Logger
}

func (o Options) normalize() (Options, error) {
	if o.FS == nil {
		return o, errors.New("cq: Options.FS is nil")
	}
	if o.EntriesPerFile == 0 {
		o.EntriesPerFile = DefaultEntriesPerFile
	}
	if o.EntriesPerFile < 0 || int64(o.EntriesPerFile) > math.MaxInt32/EntrySize {
		return o, fmt.Errorf("cq: Options.EntriesPerFile %d out of range", o.EntriesPerFile)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// ValidateTopic reports whether topic can name a queue directory: non-empty,
// at most MaxTopicLen bytes, no '/', '\\' or NUL, not "." and no "..".
// Characters such as '%' (as in %RETRY%group) are allowed. The error wraps
// ErrInvalidTopic.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	case len(topic) > MaxTopicLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidTopic, len(topic), MaxTopicLen)
	case strings.ContainsAny(topic, "/\\\x00"):
		return fmt.Errorf("%w: %q contains a path separator or NUL", ErrInvalidTopic, topic)
	case topic == "." || strings.Contains(topic, ".."):
		return fmt.Errorf("%w: %q is or contains a relative path element", ErrInvalidTopic, topic)
	}
	return nil
}

func validateQueueID(id int32) error {
	if id < 0 || id > MaxQueueID {
		return fmt.Errorf("%w: %d not in 0..%d", ErrInvalidQueueID, id, MaxQueueID)
	}
	return nil
}

// qfile is one mapped queue file.
type qfile struct {
	start int64 // queue offset of the file's first entry
	path  string
	f     vfs.File
	m     vfs.Mapping
	b     []byte // the mapping, len fileSize
}

func (f *qfile) entry(queueOffset int64) Entry {
	i := (queueOffset - f.start) * EntrySize
	return decodeEntry(f.b[i : i+EntrySize])
}

func (f *qfile) close() error {
	var errs []error
	if f.m != nil {
		if err := f.m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("unmap %s: %w", f.path, err))
		}
		f.m, f.b = nil, nil
	}
	if f.f != nil {
		if err := f.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", f.path, err))
		}
		f.f = nil
	}
	return errors.Join(errs...)
}

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
	if err := ValidateTopic(topic); err != nil {
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

// load opens the files and recovers the write position.
func (q *Queue) load() error {
	names, err := q.fs.ReadDir(q.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("list %s: %w", q.dir, err)
	}
	var files []*qfile
	fail := func(err error) error {
		for _, f := range files {
			_ = f.close()
		}
		return err
	}
	firstShort := -1
	removedAny := false
	for _, name := range names {
		start, ok := q.parseName(name)
		if !ok {
			q.log.Warn("cq: ignoring unexpected file in queue directory", "dir", q.dir, "name", name)
			continue
		}
		if n := len(files); n > 0 && files[n-1].start+q.epf != start {
			return fail(fmt.Errorf("%w: %s: file %s does not follow %s", ErrCorrupt, q.dir, name, filepath.Base(files[n-1].path)))
		}
		p := filepath.Join(q.dir, name)
		f, err := q.fs.OpenReadWrite(p)
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", p, err))
		}
		size, err := f.Size()
		if err != nil {
			_ = f.Close()
			return fail(fmt.Errorf("size of %s: %w", p, err))
		}
		if size > q.fileSize {
			_ = f.Close()
			return fail(fmt.Errorf("%w: %s is %d bytes, want %d (EntriesPerFile changed?)", ErrCorrupt, p, size, q.fileSize))
		}
		if size < q.fileSize {
			q.log.Warn("cq: extending short queue file", "file", p, "size", size, "want", q.fileSize)
			if err := f.Allocate(0, q.fileSize); err != nil {
				_ = f.Close()
				return fail(fmt.Errorf("extend %s: %w", p, err))
			}
			if firstShort < 0 {
				firstShort = len(files)
			}
		}
		m, err := f.Map(int(q.fileSize))
		if err != nil {
			_ = f.Close()
			return fail(fmt.Errorf("map %s: %w", p, err))
		}
		files = append(files, &qfile{start: start, path: p, f: f, m: m, b: m.Bytes()})
	}
	if len(files) == 0 {
		return nil
	}

	// Recover the write position.
	scan := max(len(files)-3, 0)
	if firstShort >= 0 && firstShort < scan {
		scan = firstShort
	}
	prevEnd := int64(-1) // End() of the previous real entry; -1: none yet
	if scan > 0 {
		prev := files[scan-1]
		if e := prev.entry(prev.start + q.epf - 1); !e.IsBlank() {
			prevEnd = e.End()
		}
	}
	scanStart := files[scan].start
	pos := scanStart
	end := files[len(files)-1].start + q.epf
scanLoop:
	for ; pos < end; pos++ {
		f := files[(pos-files[0].start)/q.epf]
		e := f.entry(pos)
		switch {
		case !e.valid():
			break scanLoop
		case e.IsBlank():
			if prevEnd >= 0 || e != blankEntry {
				break scanLoop // a blank after a real entry is garbage
			}
		default:
			if e.Offset < prevEnd {
				break scanLoop
			}
			prevEnd = e.End()
		}
	}
	first := firstReal(files, q.epf, pos)
	if first >= pos {
		q.log.Info("cq: no valid entries, removing queue files", "dir", q.dir, "files", len(files))
		for i := len(files) - 1; i >= 0; i-- {
			if err := q.removeFile(files[i]); err != nil {
				return fail(err)
			}
			files = files[:i]
		}
		return q.syncDir()
	}
	// Keep the file that contains pos (or, at a file boundary, the full
	// file before it); drop the rest.
	keep := int((pos-1-files[0].start)/q.epf) + 1
	if keep < len(files) {
		q.log.Info("cq: removing queue files past the recovered end", "dir", q.dir, "files", len(files)-keep, "max", pos)
		// Last first, so an interrupted removal leaves no gap.
		for i := len(files) - 1; i >= keep; i-- {
			if err := q.removeFile(files[i]); err != nil {
				return fail(err)
			}
			files = files[:i]
		}
		removedAny = true
	}
	last := files[len(files)-1]
	if off := (pos - last.start) * EntrySize; off < q.fileSize && !allZero(last.b[off:]) {
		q.log.Info("cq: zeroing garbage past the recovered end", "file", last.path, "from", off)
		if err := last.f.ZeroRange(off, q.fileSize-off); err != nil {
			return fail(fmt.Errorf("zero tail of %s: %w", last.path, err))
		}
		if err := last.f.Datasync(); err != nil {
			return fail(fmt.Errorf("sync %s: %w", last.path, err))
		}
	}
	if removedAny {
		if err := q.syncDir(); err != nil {
			return fail(err)
		}
	}
	q.files.Store(&files)
	q.min.Store(first)
	q.maxPhys.Store(q.readLocked(files, pos-1).End())
	// The recovered tail may still be only in the page cache (a process
	// crash leaves it there): the next Flush syncs it again.
	q.flushed.Store(scanStart)
	q.max.Store(pos)
	return nil
}

// firstReal returns the queue offset of the first non-blank entry below
// limit, or limit if there is none. Blanks only ever fill the start of the
// first file.
func firstReal(files []*qfile, epf, limit int64) int64 {
	if len(files) == 0 {
		return limit
	}
	f := files[0]
	hi := min(limit, f.start+epf)
	// Binary search for the first non-blank in [f.start, hi).
	lo := f.start
	for lo < hi {
		mid := lo + (hi-lo)/2
		if f.entry(mid).IsBlank() {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	// If the whole first file is blank (Put never produces that), lo is
	// the next file's first entry.
	return lo
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (q *Queue) parseName(name string) (start int64, ok bool) {
	if len(name) != fileNameLen {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	off, err := strconv.ParseInt(name, 10, 64)
	if err != nil || off%q.fileSize != 0 {
		return 0, false
	}
	return off / EntrySize, true
}

func (q *Queue) fileName(start int64) string {
	return filepath.Join(q.dir, fmt.Sprintf("%020d", start*EntrySize))
}

// removeFile unmaps, closes and removes f. The caller syncs the directory.
func (q *Queue) removeFile(f *qfile) error {
	err := f.close()
	if rerr := q.fs.Remove(f.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("remove %s: %w", f.path, rerr))
	}
	return err
}

func (q *Queue) syncDir() error {
	if err := q.fs.SyncDir(q.dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", q.dir, err)
	}
	return nil
}

// createFile creates, preallocates and maps the file whose first entry is
// queue offset start.
func (q *Queue) createFile(start int64) (*qfile, error) {
	if len(*q.files.Load()) == 0 {
		// Create the queue directory (and missing parents); Flush makes
		// their names durable.
		var missing []string
		for d := q.dir; ; d = filepath.Dir(d) {
			if _, err := q.fs.Stat(d); err == nil {
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("stat %s: %w", d, err)
			}
			missing = append(missing, filepath.Dir(d))
			if filepath.Dir(d) == d {
				break
			}
		}
		if len(missing) > 0 {
			if err := q.fs.MkdirAll(q.dir, 0o755); err != nil {
				return nil, fmt.Errorf("create %s: %w", q.dir, err)
			}
			if prev := q.parentSyncs.Load(); prev != nil {
				missing = append(missing, *prev...)
			}
			q.parentSyncs.Store(&missing)
		}
	}
	p := q.fileName(start)
	f, err := q.fs.Create(p)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	q.dirDirty.Store(true)
	cleanup := func(err error) (*qfile, error) {
		_ = f.Close()
		_ = q.fs.Remove(p)
		return nil, err
	}
	if err := f.Allocate(0, q.fileSize); err != nil {
		return cleanup(fmt.Errorf("preallocate %s: %w", p, err))
	}
	m, err := f.Map(int(q.fileSize))
	if err != nil {
		return cleanup(fmt.Errorf("map %s: %w", p, err))
	}
	return &qfile{start: start, path: p, f: f, m: m, b: m.Bytes()}, nil
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

// Put stores e at queueOffset. It must only be called by the queue's single
// writer goroutine, never concurrently with TruncatePhys, SetMinPhysOffset
// or Close.
//
//   - If e ends at or below MaxPhysOffset() it is already indexed (recovery
//     re-dispatches the commitlog tail) and Put returns nil without writing
//     or checking queueOffset.
//   - e must have Offset >= 0, 0 < Size < math.MaxInt32, an End that fits
//     in an int64, and Offset at or beyond MaxPhysOffset(); otherwise the
//     error wraps ErrInvalidEntry.
//   - On a queue with no files, queueOffset may be anything >= 0: the
//     first file is the one containing queueOffset and the entries before
//     queueOffset in it are filled with blank units.
//   - Otherwise queueOffset must equal Max(); if not, the error wraps
//     ErrQueueOffsetMismatch and names both offsets.
//
// When the last file is full, Put creates, preallocates and maps the next
// one; an error doing so (for example vfs.ErrNoSpace) leaves the queue
// unchanged and the call may be retried. On success the entry is visible to
// readers (Max() includes it) but not durable until Flush.
func (q *Queue) Put(queueOffset int64, e Entry) error {
	if q.closed.Load() {
		return ErrClosed
	}
	if !e.valid() || e.IsBlank() {
		return fmt.Errorf("%w: put %s/%d at queue offset %d: offset %d size %d", ErrInvalidEntry, q.topic, q.id, queueOffset, e.Offset, e.Size)
	}
	maxPhys := q.maxPhys.Load()
	if e.End() <= maxPhys {
		return nil // already indexed
	}
	if e.Offset < maxPhys {
		return fmt.Errorf("%w: put %s/%d at queue offset %d: commitlog offset %d overlaps the last entry ending at %d", ErrInvalidEntry, q.topic, q.id, queueOffset, e.Offset, maxPhys)
	}
	fl := *q.files.Load()
	if len(fl) == 0 {
		return q.putFirst(queueOffset, e)
	}
	mx := q.max.Load()
	if queueOffset != mx {
		return fmt.Errorf("%w: put %s/%d: queue offset %d, expected %d", ErrQueueOffsetMismatch, q.topic, q.id, queueOffset, mx)
	}
	idx := (mx - fl[0].start) / q.epf
	if idx == int64(len(fl)) {
		f, err := q.createFile(mx)
		if err != nil {
			return fmt.Errorf("put %s/%d at queue offset %d: %w", q.topic, q.id, queueOffset, err)
		}
		nfl := make([]*qfile, len(fl)+1)
		copy(nfl, fl)
		nfl[len(fl)] = f
		q.files.Store(&nfl)
		fl = nfl
	}
	f := fl[idx]
	i := (mx - f.start) * EntrySize
	encodeEntry(f.b[i:i+EntrySize], e)
	q.maxPhys.Store(e.End())
	q.max.Store(mx + 1) // publish
	return nil
}

func (q *Queue) putFirst(queueOffset int64, e Entry) error {
	if queueOffset < 0 || queueOffset > math.MaxInt64/EntrySize-q.epf {
		return fmt.Errorf("%w: put %s/%d: queue offset %d out of range", ErrQueueOffsetMismatch, q.topic, q.id, queueOffset)
	}
	start := queueOffset - queueOffset%q.epf
	f, err := q.createFile(start)
	if err != nil {
		return fmt.Errorf("put %s/%d at queue offset %d: %w", q.topic, q.id, queueOffset, err)
	}
	if queueOffset > start {
		q.log.Info("cq: queue starts mid-stream, filling blanks", "first", queueOffset, "fileStart", start)
		var unit [EntrySize]byte
		encodeEntry(unit[:], blankEntry)
		for off := int64(0); off < (queueOffset-start)*EntrySize; off += EntrySize {
			copy(f.b[off:off+EntrySize], unit[:])
		}
	}
	i := (queueOffset - start) * EntrySize
	encodeEntry(f.b[i:i+EntrySize], e)
	fl := []*qfile{f}
	q.files.Store(&fl)
	q.flushed.Store(start)
	q.min.Store(queueOffset) // before max: a reader that sees max sees min
	q.maxPhys.Store(e.End())
	q.max.Store(queueOffset + 1)
	return nil
}

// At returns the entry at queueOffset. The error wraps ErrOffsetTooSmall
// if queueOffset < Min(), ErrOffsetOverflow if queueOffset >= Max(), and
// ErrClosed after Close.
func (q *Queue) At(queueOffset int64) (Entry, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed.Load() {
		return Entry{}, ErrClosed
	}
	mx := q.max.Load()
	if queueOffset >= mx {
		return Entry{}, fmt.Errorf("%w: %s/%d offset %d, max %d", ErrOffsetOverflow, q.topic, q.id, queueOffset, mx)
	}
	if mn := min(q.min.Load(), mx); queueOffset < mn {
		return Entry{}, fmt.Errorf("%w: %s/%d offset %d, min %d", ErrOffsetTooSmall, q.topic, q.id, queueOffset, mn)
	}
	fl := *q.files.Load()
	return fl[(queueOffset-fl[0].start)/q.epf].entry(queueOffset), nil
}

// Get appends to dst the entries from queueOffset on, at most limit of them
// (fewer when Max() is reached), reading across file boundaries, and
// returns the extended slice. Get at exactly Max() returns dst unchanged
// and nil (the consumer is caught up). The error wraps ErrOffsetTooSmall if
// queueOffset < Min(), ErrOffsetOverflow if queueOffset > Max(), and
// ErrClosed after Close. limit <= 0 returns dst unchanged.
func (q *Queue) Get(queueOffset int64, limit int, dst []Entry) ([]Entry, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed.Load() {
		return dst, ErrClosed
	}
	mx := q.max.Load()
	if queueOffset > mx {
		return dst, fmt.Errorf("%w: %s/%d offset %d, max %d", ErrOffsetOverflow, q.topic, q.id, queueOffset, mx)
	}
	if mn := min(q.min.Load(), mx); queueOffset < mn {
		return dst, fmt.Errorf("%w: %s/%d offset %d, min %d", ErrOffsetTooSmall, q.topic, q.id, queueOffset, mn)
	}
	if limit <= 0 || queueOffset == mx {
		return dst, nil
	}
	end := min(mx, queueOffset+int64(limit))
	fl := *q.files.Load()
	for off := queueOffset; off < end; {
		f := fl[(off-fl[0].start)/q.epf]
		stop := min(end, f.start+q.epf)
		b := f.b[(off-f.start)*EntrySize : (stop-f.start)*EntrySize]
		for ; len(b) >= EntrySize; b = b[EntrySize:] {
			dst = append(dst, decodeEntry(b))
		}
		off = stop
	}
	return dst, nil
}

// readLocked reads entry queueOffset, which must be within the files. The
// caller holds mu (shared or exclusive) or is the writer.
func (q *Queue) readLocked(fl []*qfile, queueOffset int64) Entry {
	return fl[(queueOffset-fl[0].start)/q.epf].entry(queueOffset)
}

// searchPhys returns the first queue offset in [lo, hi) whose entry has
// Offset >= phys, or hi. Entries in [lo, hi) must be real.
func (q *Queue) searchPhys(fl []*qfile, lo, hi, phys int64) int64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if q.readLocked(fl, mid).Offset < phys {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// TruncatePhys drops every entry whose commitlog offset is >= physOffset:
// it zeroes them in the file that keeps some entries (and syncs it), removes
// whole files past that point, and lowers Max, MaxPhysOffset, Min and the
// flushed offset to match. If no real entry remains, all files are removed
// and the queue is empty (Max() == 0, and the next Put may start anywhere).
// Recovery calls it with the commitlog's valid end, replication with the
// point where logs diverged.
//
// It must not run concurrently with Put. Readers wait for it.
func (q *Queue) TruncatePhys(physOffset int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return ErrClosed
	}
	fl := *q.files.Load()
	if len(fl) == 0 {
		return nil
	}
	mx := q.max.Load()
	first := firstReal(fl, q.epf, mx)
	n := q.searchPhys(fl, first, mx, physOffset)
	if n == mx {
		return nil
	}
	q.log.Info("cq: truncating", "phys", physOffset, "from", n, "max", mx)
	if n <= first {
		return q.removeAllLocked(fl)
	}
	k := int((n - 1 - fl[0].start) / q.epf) // file holding the new last entry
	keep := fl[:k+1]
	drop := fl[k+1:]
	var errs []error
	last := keep[k]
	if off := (n - last.start) * EntrySize; off < q.fileSize {
		zeroEnd := (min(mx, last.start+q.epf) - last.start) * EntrySize
		if err := last.f.ZeroRange(off, zeroEnd-off); err != nil {
			return fmt.Errorf("truncate %s/%d: zero %s: %w", q.topic, q.id, last.path, err)
		}
		if err := last.f.Datasync(); err != nil {
			errs = append(errs, fmt.Errorf("truncate %s/%d: sync %s: %w", q.topic, q.id, last.path, err))
		}
	}
	nfl := append([]*qfile(nil), keep...)
	q.files.Store(&nfl)
	q.max.Store(n)
	q.maxPhys.Store(q.readLocked(nfl, n-1).End())
	if q.min.Load() > n {
		q.min.Store(n)
	}
	if q.flushed.Load() > n {
		q.flushed.Store(n)
	}
	for i := len(drop) - 1; i >= 0; i-- { // last first: no gap if interrupted
		if err := q.removeFile(drop[i]); err != nil {
			errs = append(errs, fmt.Errorf("truncate %s/%d: %w", q.topic, q.id, err))
		}
	}
	if len(drop) > 0 {
		if err := q.syncDir(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeAllLocked removes every file and resets the queue to empty.
func (q *Queue) removeAllLocked(fl []*qfile) error {
	empty := []*qfile{}
	q.files.Store(&empty)
	q.max.Store(0)
	q.min.Store(0)
	q.maxPhys.Store(0)
	q.flushed.Store(0)
	var errs []error
	for i := len(fl) - 1; i >= 0; i-- { // last first: no gap if interrupted
		if err := q.removeFile(fl[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(fl) > 0 {
		if err := q.syncDir(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove files of %s/%d: %w", q.topic, q.id, errors.Join(errs...))
	}
	return nil
}

// SetMinPhysOffset applies retention: the commitlog's minimum offset is now
// minPhys. It deletes, oldest first, whole files whose last entry ends at or
// below minPhys, never the last file and stopping at the first file it keeps
// (so there are no holes), and moves Min() forward to the first entry whose
// commitlog offset is >= minPhys (to Max() if there is none). Min never
// moves backwards. It returns the number of files deleted; an error removing
// a file stops the deletion and is returned with the count so far.
//
// It must not run concurrently with Put. Readers wait for it.
func (q *Queue) SetMinPhysOffset(minPhys int64) (deleted int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return 0, ErrClosed
	}
	fl := *q.files.Load()
	if len(fl) == 0 {
		return 0, nil
	}
	mx := q.max.Load()
	var errs []error
	for deleted < len(fl)-1 {
		f := fl[deleted]
		e := f.entry(f.start + q.epf - 1)
		if !e.IsBlank() && e.End() > minPhys {
			break
		}
		fl2 := fl[deleted+1:]
		cp := append([]*qfile(nil), fl2...)
		q.files.Store(&cp)
		if rerr := q.removeFile(f); rerr != nil {
			errs = append(errs, rerr)
			deleted++
			break
		}
		deleted++
	}
	if deleted > 0 {
		q.log.Info("cq: deleted expired files", "files", deleted, "minPhys", minPhys)
		fl = *q.files.Load()
		if serr := q.syncDir(); serr != nil {
			errs = append(errs, serr)
		}
	}
	lo := max(q.min.Load(), firstReal(fl, q.epf, mx), fl[0].start)
	if lo < mx {
		lo = q.searchPhys(fl, lo, mx, minPhys)
	} else {
		lo = mx
	}
	if lo > q.min.Load() {
		q.min.Store(lo)
	}
	if len(errs) > 0 {
		return deleted, fmt.Errorf("retention of %s/%d: %w", q.topic, q.id, errors.Join(errs...))
	}
	return deleted, nil
}

// SearchTime returns the queue offset of the first entry whose store
// timestamp is >= ts, by binary search over [Min(), Max()) calling
// storeTime (which reads the record's timestamp from the commitlog) for
// O(log n) entries. It returns Max() if every entry is older than ts and
// Min() if ts is before the first. Store timestamps must be non-decreasing
// in queue order for the answer to be exact. An error from storeTime is
// returned wrapped. Entries removed by retention during the search are
// skipped.
func (q *Queue) SearchTime(ts int64, storeTime func(e Entry) (int64, error)) (int64, error) {
	lo, hi := q.Min(), q.Max()
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.At(mid)
		if err != nil {
			if errors.Is(err, ErrOffsetTooSmall) {
				lo = max(mid+1, q.Min())
				continue
			}
			return 0, fmt.Errorf("search time in %s/%d: %w", q.topic, q.id, err)
		}
		t, err := storeTime(e)
		if err != nil {
			return 0, fmt.Errorf("search time in %s/%d at queue offset %d: %w", q.topic, q.id, mid, err)
		}
		if t < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// Flush makes every entry below the current Max durable: it Datasyncs each
// file holding entries written since the last successful Flush, then syncs
// the queue directory (and its parents, the first time) if files were
// created. It is safe to call concurrently with Put and readers; concurrent
// Flush calls are serialized. On error the flushed offset does not advance;
// per the vfs durability model a failed sync means the store must stop
// writing.
func (q *Queue) Flush() error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed.Load() {
		return ErrClosed
	}
	return q.flushLocked()
}

func (q *Queue) flushLocked() error {
	mx := q.max.Load()
	fl := *q.files.Load()
	fd := q.flushed.Load()
	if mx > fd && len(fl) > 0 {
		fd = max(fd, fl[0].start)
		for i := (fd - fl[0].start) / q.epf; i < int64(len(fl)) && fl[i].start < mx; i++ {
			if err := fl[i].f.Datasync(); err != nil {
				return fmt.Errorf("flush %s/%d: sync %s: %w", q.topic, q.id, fl[i].path, err)
			}
		}
	}
	if q.dirDirty.Swap(false) {
		if err := q.syncDir(); err != nil {
			q.dirDirty.Store(true)
			return fmt.Errorf("flush %s/%d: %w", q.topic, q.id, err)
		}
	}
	if dirs := q.parentSyncs.Swap(nil); dirs != nil {
		for _, d := range *dirs {
			if err := q.fs.SyncDir(d); err != nil {
				q.parentSyncs.Store(dirs)
				return fmt.Errorf("flush %s/%d: sync dir %s: %w", q.topic, q.id, d, err)
			}
		}
	}
	if mx > q.flushed.Load() {
		q.flushed.Store(mx)
	}
	return nil
}

// Close flushes the queue, then unmaps and closes its files. It must not
// run concurrently with Put; readers that arrive later get ErrClosed. The
// flush error, if any, is returned, but the files are closed regardless.
// Closing twice returns ErrClosed.
func (q *Queue) Close() error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Swap(true) {
		return ErrClosed
	}
	err := q.flushLocked()
	for _, f := range *q.files.Load() {
		err = errors.Join(err, f.close())
	}
	if err != nil {
		return fmt.Errorf("close %s/%d: %w", q.topic, q.id, err)
	}
	return nil
}

// destroy closes the queue without flushing and removes its directory.
func (q *Queue) destroy() error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	var err error
	if !q.closed.Swap(true) {
		for _, f := range *q.files.Load() {
			err = errors.Join(err, f.close())
		}
	}
	if rerr := q.fs.RemoveAll(q.dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("remove %s: %w", q.dir, rerr))
	}
	return err
}

// OffsetStatus classifies a consumer's requested queue offset against a
// queue, following RocketMQ's pull-path statuses (see CheckOffset).
type OffsetStatus int

const (
	// OffsetFound: Min() <= offset < Max(); entries can be read there.
	OffsetFound OffsetStatus = iota
	// NoMessageInQueue: the queue has never held an entry (Max() == 0).
	// The suggested next offset is 0; a broker answers PULL_OFFSET_MOVED if
	// the request was not already 0, else PULL_NOT_FOUND.
	NoMessageInQueue
	// OffsetTooSmall: offset < Min() (removed by retention, or a blank).
	// The suggested next offset is Min().
	OffsetTooSmall
	// OffsetOverflowOne: offset == Max(), the normal caught-up case (long
	// poll). The suggested next offset is offset itself.
	OffsetOverflowOne
	// OffsetOverflowBadly: offset > Max(). The suggested next offset is
	// Max(), never 0 (keel corrects beyond-max offsets to max, as RocketMQ
	// 4.9.4+ does).
	OffsetOverflowBadly
)

// String returns the RocketMQ-style name of the status.
func (s OffsetStatus) String() string {
	switch s {
	case OffsetFound:
		return "FOUND"
	case NoMessageInQueue:
		return "NO_MESSAGE_IN_QUEUE"
	case OffsetTooSmall:
		return "OFFSET_TOO_SMALL"
	case OffsetOverflowOne:
		return "OFFSET_OVERFLOW_ONE"
	case OffsetOverflowBadly:
		return "OFFSET_OVERFLOW_BADLY"
	}
	return fmt.Sprintf("OffsetStatus(%d)", int(s))
}

// CheckOffset classifies offset against one consistent snapshot of Min()
// and Max() and returns the offset a consumer should continue from: offset
// itself for OffsetFound and OffsetOverflowOne, 0 for NoMessageInQueue,
// Min() for OffsetTooSmall, Max() for OffsetOverflowBadly. Whether the
// broker applies the correction (on a slave, RocketMQ's offsetCheckInSlave)
// is the caller's decision. Safe for concurrent use.
func (q *Queue) CheckOffset(offset int64) (OffsetStatus, int64) {
	mx := q.max.Load()
	mn := min(q.min.Load(), mx)
	switch {
	case mx == 0:
		return NoMessageInQueue, 0
	case offset < mn:
		return OffsetTooSmall, mn
	case offset == mx:
		return OffsetOverflowOne, offset
	case offset > mx:
		return OffsetOverflowBadly, mx
	}
	return OffsetFound, offset
}
