package timer

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

// timerLog is the timer log: units appended back to back, addressed by
// their byte position, in segment files of segSize bytes named by the
// position of their first byte (20 digits). Appends go through a buffer
// of up to bufSize bytes; read sees buffered units too.
type timerLog struct {
	dir     string
	segSize int64

	mu   sync.RWMutex       // guards segs; appends and reads of buf are the index's (under its lock)
	segs map[int64]*os.File // base → file
	end  int64              // position past the last unit, buffered ones included
	buf  []byte             // units from end-len(buf) not yet written
}

const bufSize = 64 << 10

func segName(base int64) string { return fmt.Sprintf("%020d", base) }

// openLog opens the segments in dir, truncating the log to end (units past
// it are dropped; segments wholly past it removed).
func openLog(dir string, segSize, end int64) (*timerLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create timer log dir: %w", err)
	}
	l := &timerLog{dir: dir, segSize: segSize, segs: map[int64]*os.File{}, end: end}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list timer log: %w", err)
	}
	for _, e := range names {
		base, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || len(e.Name()) != 20 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if base >= end {
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("remove timer log segment past the checkpoint: %w", err)
			}
			continue
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open timer log segment: %w", err)
		}
		if base+segSize > end {
			if err := f.Truncate(end - base); err != nil {
				f.Close()
				return nil, fmt.Errorf("truncate timer log to the checkpoint at %d: %w", end, err)
			}
		}
		l.segs[base] = f
	}
	return l, nil
}

// readRaw fills b from the segment files (not the buffer) at pos; the
// bytes must lie in one segment.
func (l *timerLog) readRaw(pos int64, b []byte) error {
	base := pos - pos%l.segSize
	l.mu.RLock()
	f := l.segs[base]
	l.mu.RUnlock()
	if f == nil {
		return fmt.Errorf("timer log position %d: segment %s missing", pos, segName(base))
	}
	if _, err := f.ReadAt(b, pos-base); err != nil {
		return fmt.Errorf("read timer log at %d: %w", pos, err)
	}
	return nil
}

// read returns the unit at pos, buffered or written.
func (l *timerLog) read(pos int64) (unit, error) {
	var b [unitSize]byte
	if start := l.end - int64(len(l.buf)); pos >= start {
		copy(b[:], l.buf[pos-start:])
	} else if err := l.readRaw(pos, b[:]); err != nil {
		return unit{}, err
	}
	u, ok := decodeUnit(b[:])
	if !ok {
		return unit{}, fmt.Errorf("timer log at %d: not a unit (damaged)", pos)
	}
	return u, nil
}

// append adds u and returns its position.
func (l *timerLog) append(u unit) (int64, error) {
	if len(l.buf)+unitSize > bufSize {
		if err := l.write(); err != nil {
			return 0, err
		}
	}
	pos := l.end
	var b [unitSize]byte
	u.encode(b[:])
	l.buf = append(l.buf, b[:]...)
	l.end += unitSize
	return pos, nil
}

// write writes the buffer to the segments.
func (l *timerLog) write() error {
	pos := l.end - int64(len(l.buf))
	for len(l.buf) > 0 {
		base := pos - pos%l.segSize
		l.mu.Lock()
		f := l.segs[base]
		if f == nil {
			var err error
			f, err = os.OpenFile(filepath.Join(l.dir, segName(base)), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				l.mu.Unlock()
				return fmt.Errorf("create timer log segment: %w", err)
			}
			l.segs[base] = f
		}
		l.mu.Unlock()
		n := min(int64(len(l.buf)), base+l.segSize-pos)
		if _, err := f.WriteAt(l.buf[:n], pos-base); err != nil {
			return fmt.Errorf("write timer log at %d: %w", pos, err)
		}
		l.buf = l.buf[n:]
		pos += n
	}
	l.buf = l.buf[:0]
	return nil
}

// sync writes the buffer and syncs every segment.
func (l *timerLog) sync() error {
	if err := l.write(); err != nil {
		return err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for base, f := range l.segs {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync timer log segment %s: %w", segName(base), err)
		}
	}
	return nil
}

// bases are the segments' first positions, in order.
func (l *timerLog) bases() []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]int64, 0, len(l.segs))
	for b := range l.segs {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// remove deletes the segment at base.
func (l *timerLog) remove(base int64) error {
	l.mu.Lock()
	f := l.segs[base]
	delete(l.segs, base)
	l.mu.Unlock()
	if f != nil {
		f.Close()
	}
	if err := os.Remove(filepath.Join(l.dir, segName(base))); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove delivered timer log segment %s: %w", segName(base), err)
	}
	return nil
}

func (l *timerLog) close() error {
	err := l.write()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.segs {
		f.Close()
	}
	l.segs = map[int64]*os.File{}
	return err
}
