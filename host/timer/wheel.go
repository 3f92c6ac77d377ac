package timer

import (
	"fmt"
	"os"
	"sort"
)

// wheel is the wheel file: n slots of slotSize bytes; tick t lives in slot
// t mod n. Changed slots are kept in dirty until flush writes them, so the
// file never points at units that are not yet durable in the timer log
// (the index syncs the log first).
type wheel struct {
	f     *os.File
	n     int64
	dirty map[int64]slot // slot index → slot; bounded by n
}

func openWheel(path string, n int64) (*wheel, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open timer wheel: %w", err)
	}
	if err := f.Truncate(n * slotSize); err != nil {
		f.Close()
		return nil, fmt.Errorf("size timer wheel to %d slots: %w", n, err)
	}
	return &wheel{f: f, n: n, dirty: map[int64]slot{}}, nil
}

func (w *wheel) index(tick int64) int64 { return ((tick % w.n) + w.n) % w.n }

// raw reads slot index i as stored (dirty or on file); ok false if empty.
func (w *wheel) raw(i int64) (slot, bool, error) {
	if s, ok := w.dirty[i]; ok {
		return s, true, nil
	}
	var b [slotSize]byte
	if _, err := w.f.ReadAt(b[:], i*slotSize); err != nil {
		return slot{}, false, fmt.Errorf("read timer wheel slot %d: %w", i, err)
	}
	s, ok := decodeSlot(b[:])
	return s, ok, nil
}

// scan calls fn for every non-empty slot as stored (dirty or on file), in
// index order, reading the file in large blocks: a wheel has hundreds of
// thousands of slots, and one read per slot made opening it take a
// second.
func (w *wheel) scan(fn func(i int64, s slot) error) error {
	const perBlock = 2048
	buf := make([]byte, perBlock*slotSize)
	for base := int64(0); base < w.n; base += perBlock {
		k := min(perBlock, w.n-base)
		b := buf[:k*slotSize]
		if _, err := w.f.ReadAt(b, base*slotSize); err != nil {
			return fmt.Errorf("read timer wheel slots %d..%d: %w", base, base+k, err)
		}
		for j := int64(0); j < k; j++ {
			i := base + j
			s, ok := w.dirty[i]
			if !ok {
				s, ok = decodeSlot(b[j*slotSize : (j+1)*slotSize])
			}
			if !ok {
				continue
			}
			if err := fn(i, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// get is tick's slot (empty if the slot holds another tick).
func (w *wheel) get(tick int64) (slot, error) {
	s, ok, err := w.raw(w.index(tick))
	if err != nil || !ok || s.tick != tick || s.num <= 0 {
		return emptySlot(tick), err
	}
	return s, nil
}

func (w *wheel) put(s slot) { w.dirty[w.index(s.tick)] = s }

// flush writes the dirty slots and syncs the file.
func (w *wheel) flush() error {
	if len(w.dirty) == 0 {
		return nil
	}
	idx := make([]int64, 0, len(w.dirty))
	for i := range w.dirty {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	var b [slotSize]byte
	for _, i := range idx {
		w.dirty[i].encode(b[:])
		if _, err := w.f.WriteAt(b[:], i*slotSize); err != nil {
			return fmt.Errorf("write timer wheel slot %d: %w", i, err)
		}
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync timer wheel: %w", err)
	}
	clear(w.dirty)
	return nil
}

func (w *wheel) close() error { return w.f.Close() }
