package core

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
)

// LogLocation is where the store's commitlog segments are on the
// operating system's filesystem, for a reader in another process
// (LogFiles): the commitlog directory and the segment size. ok is false
// when the store runs on another vfs.FS (a crash-simulating or in-memory
// one), whose files the operating system does not show as the store sees
// them.
func (s *Store) LogLocation() (dir string, segmentSize int64, ok bool) {
	if s.fs != vfs.OS {
		return "", 0, false
	}
	return s.cl, s.opts.SegmentSize, true
}

// LogFiles reads committed commitlog bytes straight from a store's segment
// files (LogLocation), read-only, from another process than the store's:
// an external replication plugin streaming the log without asking the
// store for every batch. It is safe for concurrent use.
//
// It relies on what the store guarantees of bytes below its committed
// offset: they are in the segment files (the page cache the store's
// mapping shares) and never change, except by a truncation, after which
// the reader must be Reset and must not be given a committed offset the
// truncation removed. Retention may delete a segment: a read of it then
// fails, unless the reader still holds it open, when it returns the bytes
// the segment held (where Store.ReadLog would refuse the offset as below
// the log's minimum). Every error means "ask the store" (Store.ReadLog),
// never that the log is damaged.
type LogFiles struct {
	dir     string
	segSize int64

	mu    sync.Mutex
	f     *os.File // the segment last read, or nil
	start int64    // f's first offset
}

// OpenLogFiles returns a reader of the segments in dir (a commitlog
// directory LogLocation gave) of segmentSize bytes each. Files are opened
// as reads need them.
func OpenLogFiles(dir string, segmentSize int64) (*LogFiles, error) {
	if dir == "" || segmentSize <= 0 {
		return nil, fmt.Errorf("open log files: directory %q, segment size %d", dir, segmentSize)
	}
	return &LogFiles{dir: dir, segSize: segmentSize}, nil
}

// logFilesFirstRead is how many bytes ReadInto reads when maxBytes asks
// for fewer: one read then usually holds a whole first record.
const logFilesFirstRead = 4 << 10

// ReadInto returns into dst[:0] what Store.ReadLogInto(from, maxBytes,
// dst) returns on a store whose committed offset is at least committed,
// reading nothing at or beyond committed: whole records from the record
// boundary from (at least one, about maxBytes, never crossing a segment,
// a BLANK record whole). from must be below committed. An error (the
// segment gone, a short read, bytes that are not records) means the
// caller should ask the store instead.
func (l *LogFiles) ReadInto(from, committed int64, maxBytes int, dst []byte) ([]byte, error) {
	dst = dst[:0]
	if from < 0 || from >= committed {
		return dst, fmt.Errorf("read log files at %d: outside [0, %d)", from, committed)
	}
	start := from - from%l.segSize
	avail := min(committed, start+l.segSize) - from
	f, err := l.open(start)
	if err != nil {
		return dst, err
	}
	want := min(avail, int64(max(maxBytes, logFilesFirstRead)))
	for {
		b, err := readAt(f, dst, from-start, int(want))
		if err != nil {
			l.drop(f)
			return dst, fmt.Errorf("read log files at %d (%d bytes): %w", from, want, err)
		}
		n, need, err := wholeRecords(b, maxBytes, true)
		switch {
		case err == nil && n > 0:
			return b[:n], nil
		case errors.Is(err, record.ErrIncomplete) && need > int(want) && int64(need) <= avail:
			want = int64(need) // a first record longer than the first read
			dst = b[:0]
		default:
			return dst, fmt.Errorf("read log files at %d: %d of %d bytes are not whole records: %w", from, len(b), avail, err)
		}
	}
}

// readAt reads n bytes at off (within f) into dst[:0], grown as needed.
func readAt(f *os.File, dst []byte, off int64, n int) ([]byte, error) {
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	b := dst[:n]
	if _, err := f.ReadAt(b, off); err != nil {
		return dst[:0], err
	}
	return b, nil
}

// open returns the segment starting at start, keeping it open for the
// next read.
func (l *LogFiles) open(start int64) (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil && l.start == start {
		return l.f, nil
	}
	f, err := os.Open(filepath.Join(l.dir, segmentName(start)))
	if err != nil {
		return nil, fmt.Errorf("read log files: %w", err)
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.start = f, start
	return f, nil
}

// drop closes f if it is still the file kept open.
func (l *LogFiles) drop(f *os.File) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == f {
		l.f.Close()
		l.f = nil
	}
}

// Reset closes the file kept open: the next read opens the segment anew
// (after a truncation, which may have replaced it).
func (l *LogFiles) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// Close releases the reader's files. It may be used again afterwards.
func (l *LogFiles) Close() error {
	l.Reset()
	return nil
}
