package cq

import (
	"errors"
	"fmt"
)

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
