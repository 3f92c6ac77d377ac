package timer

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// index is the on-disk, time-bucketed index of pending timers: the wheel
// (one slot per tick, wheel.go), the timer log (units chained per slot
// from the newest back, log.go) and the checkpoint (checkpoint.go). Its
// memory is a write buffer, the wheel's dirty slots (at most one per slot)
// and one entry per log segment: it does not grow with the number of
// pending timers. It is safe for concurrent use.
type index struct {
	dir   string
	log   *slog.Logger
	mu    sync.Mutex
	c     checkpoint // the in-memory state; c.save persists it
	tl    *timerLog
	wh    *wheel
	walk  int64 // the highest tick whose chain was handed to a walker; adds go after it
	dirty bool  // changed since the last checkpoint
	// walkBlock is unitAt's last read: log bytes from start on.
	walkBlock struct {
		start int64
		b     []byte
	}
}

// Layout files under an index's directory.
const (
	wheelName  = "timerwheel"
	logDirName = "timerlog"
	// segUnits is the number of units in one timer log segment (5 MiB).
	segUnits = 1 << 17
)

// errFull is Add's answer for a tick a whole wheel turn ahead of the
// read tick: the slot may still hold undelivered timers.
var errFull = errors.New("timer wheel full: the tick is a whole turn ahead of delivery")

// openIndex opens the index in dir with precisionMs and slots, recovering
// from the checkpoint: the log is cut at its durable end and wheel slots
// that point past it are walked back to their last durable unit. fresh
// reports that dir held no index (reset must then set its start). A layout
// other than the one dir was built with is an error.
func openIndex(dir string, precisionMs, slots int64, log *slog.Logger) (ix *index, fresh bool, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("create timer dir: %w", err)
	}
	c, ok, err := loadCheckpoint(filepath.Join(dir, checkpointName))
	if err != nil {
		return nil, false, err
	}
	if ok && (c.PrecisionMs != precisionMs || c.Slots != slots) {
		return nil, false, fmt.Errorf("timer index in %s was built with precision %d ms and %d slots, the profile asks for %d ms and %d: restore store.timer_precision and store.timer_max_delay, or remove the directory while no timer is pending",
			dir, c.PrecisionMs, c.Slots, precisionMs, slots)
	}
	if !ok {
		for _, name := range []string{wheelName, logDirName} {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return nil, false, fmt.Errorf("clear timer dir: %w", err)
			}
		}
		c = checkpoint{PrecisionMs: precisionMs, Slots: slots, Segments: map[int64]int64{}}
	}
	ix = &index{dir: dir, log: log, c: c}
	if ix.wh, err = openWheel(filepath.Join(dir, wheelName), slots); err != nil {
		return nil, false, err
	}
	// The log is opened past the checkpoint first so that the revert can
	// read the units the wheel points to (synced before the wheel was).
	if ix.tl, err = openLog(filepath.Join(dir, logDirName), segUnits*unitSize, 1<<62); err != nil {
		ix.wh.close()
		return nil, false, err
	}
	if err := ix.revert(); err != nil {
		ix.close()
		return nil, false, err
	}
	ix.tl.close()
	if ix.tl, err = openLog(filepath.Join(dir, logDirName), segUnits*unitSize, c.LogEnd); err != nil {
		ix.wh.close()
		return nil, false, err
	}
	ix.walk = c.ReadTick - 1
	return ix, !ok, nil
}

// revert walks every slot that points at or past the checkpoint's log end
// back to its newest unit before it, and writes the wheel.
func (ix *index) revert() error {
	end := ix.c.LogEnd
	n := 0
	err := ix.wh.scan(func(i int64, s slot) error {
		if s.num <= 0 || s.last < end {
			return nil
		}
		pos := s.last
		for pos >= end && s.num > 0 {
			u, err := ix.tl.read(pos)
			if err != nil {
				ix.log.Warn("timer wheel slot points at a unit that is not in the log; emptying it", "tick", s.tick, "err", err)
				pos = -1
				break
			}
			pos = u.prev
			s.num--
		}
		if pos < 0 || s.num <= 0 {
			s = emptySlot(s.tick)
		} else {
			s.last = pos
		}
		ix.wh.dirty[i] = s
		n++
		return nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		ix.log.Info("timer wheel reverted to its checkpoint", "slots", n)
	}
	return ix.wh.flush()
}

// reset starts an empty index reading the timer queue at queueOffset and
// delivering from readTick; records below skipUntil due before readTick
// are skipped.
func (ix *index) reset(queueOffset, readTick, skipUntil int64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.c.QueueOffset, ix.c.ReadTick = queueOffset, readTick
	ix.c.SkipBelowTick, ix.c.SkipUntilOffset = readTick, skipUntil
	ix.walk = readTick - 1
	ix.dirty = true
}

// state is the in-memory checkpoint (a copy).
func (ix *index) state() checkpoint {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	c := ix.c
	c.Segments = nil
	return c
}

// add indexes the timer record at phys (size bytes, due at dueMs), the
// timer queue's entry queueOffset, and moves the queue offset past it. A
// tick already handed to a walker is moved to the next one; a record that
// a rebuild skips is only counted. It returns errFull, changing nothing,
// when the tick is a whole wheel turn ahead of the read tick.
func (ix *index) add(dueMs, phys int64, size int32, queueOffset int64) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	tick := floorDiv(dueMs, ix.c.PrecisionMs)
	if queueOffset < ix.c.SkipUntilOffset && tick < ix.c.SkipBelowTick {
		ix.c.QueueOffset = queueOffset + 1
		ix.dirty = true
		return nil
	}
	tick = max(tick, ix.walk+1)
	if tick-ix.c.ReadTick >= ix.wh.n {
		return errFull
	}
	s, err := ix.wh.get(tick)
	if err != nil {
		return err
	}
	pos, err := ix.tl.append(unit{prev: s.last, due: dueMs, phys: phys, size: size})
	if err != nil {
		return err
	}
	if s.num == 0 {
		s.first = pos
	}
	s.last = pos
	s.num++
	ix.wh.put(s)
	base := pos - pos%ix.tl.segSize
	if t, ok := ix.c.Segments[base]; !ok || tick > t {
		ix.c.Segments[base] = tick
	}
	ix.c.QueueOffset = queueOffset + 1
	ix.c.LogEnd = ix.tl.end
	ix.dirty = true
	return nil
}

// skipTo moves the queue offset to next (entries that need no index).
func (ix *index) skipTo(next int64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if next > ix.c.QueueOffset {
		ix.c.QueueOffset = next
		ix.dirty = true
	}
}

// beginWalk hands tick's chain to the caller: no unit is added to tick
// afterwards. It returns the newest unit's position (-1: none) and the
// count; read the chain with unitAt.
func (ix *index) beginWalk(tick int64) (last int64, num int32, err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.walk = max(ix.walk, tick)
	s, err := ix.wh.get(tick)
	if err != nil {
		return -1, 0, err
	}
	if s.num > 0 {
		if err := ix.tl.write(); err != nil {
			return -1, 0, err
		}
	}
	return s.last, s.num, nil
}

// unitAt reads a unit of a chain beginWalk handed out. It reads the log a
// block at a time, the block ending at pos, and serves later positions of
// the block from it: a chain runs backwards through the log, and a slot's
// units lie close together when its timers were sent close together, so
// one read serves many. Written units never change, so the block never
// goes stale. unitAt is for one walker at a time (the delivery loop).
func (ix *index) unitAt(pos int64) (unit, error) {
	w := &ix.walkBlock
	if pos < w.start || pos+unitSize > w.start+int64(len(w.b)) {
		base := pos - pos%ix.tl.segSize
		from := max(base, pos+unitSize-walkBlockSize)
		if cap(w.b) < walkBlockSize {
			w.b = make([]byte, walkBlockSize)
		}
		w.b = w.b[:pos+unitSize-from]
		if err := ix.tl.readRaw(from, w.b); err != nil {
			w.b = w.b[:0]
			return unit{}, err
		}
		w.start = from
	}
	u, ok := decodeUnit(w.b[pos-w.start:])
	if !ok {
		return unit{}, fmt.Errorf("timer log at %d: not a unit (damaged)", pos)
	}
	return u, nil
}

// walkBlockSize is the size of unitAt's reads.
const walkBlockSize = 64 << 10

// delivered records that every tick below next is delivered durably.
func (ix *index) delivered(next int64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if next > ix.c.ReadTick {
		ix.c.ReadTick = next
		ix.dirty = true
	}
}

// save syncs the log, writes and syncs the wheel, then writes the
// checkpoint, if anything changed; then it removes the log segments whose
// units are all delivered.
func (ix *index) save() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !ix.dirty {
		return nil
	}
	if err := ix.tl.sync(); err != nil {
		return err
	}
	if err := ix.wh.flush(); err != nil {
		return err
	}
	ix.c.LogEnd = ix.tl.end
	if err := ix.c.save(filepath.Join(ix.dir, checkpointName)); err != nil {
		return err
	}
	ix.dirty = false
	cur := ix.tl.end - ix.tl.end%ix.tl.segSize
	for _, base := range ix.tl.bases() {
		if t, ok := ix.c.Segments[base]; base < cur && (!ok || t < ix.c.ReadTick) {
			if err := ix.tl.remove(base); err != nil {
				return err
			}
			delete(ix.c.Segments, base)
			ix.dirty = true
		}
	}
	return nil
}

// close closes the files without saving.
func (ix *index) close() error {
	return errors.Join(ix.tl.close(), ix.wh.close())
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func removeAll(dir, name string) error { return os.RemoveAll(filepath.Join(dir, name)) }
