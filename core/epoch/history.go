// Package epoch keeps a log's epoch history: the list of (epoch, start
// offset) pairs saying from which commitlog offset on the records were
// written under which leadership term. Replication compares two histories
// to find where two logs diverge (FindConsistentPoint), as RocketMQ 5's
// controller mode does with its epochFileCheckpoint.
//
// # Rules of a history
//
// Entries are ordered oldest first. Epochs strictly increase; start offsets
// never decrease; both are non-negative. Entry i covers the log offsets
// [entries[i].StartOffset, entries[i+1].StartOffset), and the last entry
// covers [StartOffset, log end).
//
// An empty epoch — a term in which no record was written, for example a
// broker that became leader and lost leadership before any write — is an
// entry whose StartOffset equals the next entry's StartOffset. Empty epochs
// are kept: they record that the term existed. They own no offsets, so
// EpochAt never returns one (except a last entry, whose range is open).
// RocketMQ instead requires strictly increasing start offsets and so cannot
// represent them.
package epoch

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/vfs"
)

// Entry says that the records from StartOffset on (up to the next entry's
// StartOffset) were written in Epoch.
type Entry struct {
	Epoch       int32 // leadership term, >= 0
	StartOffset int64 // first log offset written in Epoch, >= 0
}

// String formats e as the epoch file does: "<epoch>-<startOffset>".
func (e Entry) String() string { return fmt.Sprintf("%d-%d", e.Epoch, e.StartOffset) }

// ErrInvalid is wrapped by the errors of Append, Reset, Validate and
// FindConsistentPoint when an argument breaks the rules of a history.
var ErrInvalid = errors.New("invalid epoch history")

// Validate returns nil if entries form a valid history (see the package
// comment), and an error wrapping ErrInvalid naming the first offending
// entry otherwise.
func Validate(entries []Entry) error {
	for i, e := range entries {
		if e.Epoch < 0 || e.StartOffset < 0 {
			return fmt.Errorf("%w: entry %d (%v) is negative", ErrInvalid, i, e)
		}
		if i == 0 {
			continue
		}
		p := entries[i-1]
		if e.Epoch <= p.Epoch {
			return fmt.Errorf("%w: entry %d (%v): epoch not greater than the previous %v", ErrInvalid, i, e, p)
		}
		if e.StartOffset < p.StartOffset {
			return fmt.Errorf("%w: entry %d (%v): start offset below the previous %v", ErrInvalid, i, e, p)
		}
	}
	return nil
}

// endOf returns the end offset of entries[i]: the next entry's start, or
// logEnd for the last one.
func endOf(entries []Entry, i int, logEnd int64) int64 {
	if i+1 < len(entries) {
		return entries[i+1].StartOffset
	}
	return logEnd
}

// find returns the index of epoch in entries, or -1.
func find(entries []Entry, epoch int32) int {
	i, ok := slices.BinarySearchFunc(entries, epoch, func(e Entry, ep int32) int {
		switch {
		case e.Epoch < ep:
			return -1
		case e.Epoch > ep:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// History is a log's epoch history, persisted in one file. It is safe for
// concurrent use. Every mutating method writes the file (atomically, with
// meta.WriteFileAtomic) before changing the in-memory history, so after a
// crash the file holds the history as of the last mutation that returned
// nil, or — for a mutation that was in progress — the one before or after
// it, never anything else. A mutation that returns an error leaves the
// in-memory history unchanged.
type History struct {
	fsys vfs.FS
	path string

	mu      sync.RWMutex
	entries []Entry // guarded by mu; never mutated in place, only replaced
}

// Open loads the history stored at path. A missing file is an empty history
// (nothing is written until the first mutation); a leftover temporary file
// from an interrupted write is ignored. A file that exists but does not
// parse (see Parse) is an error wrapping ErrCorrupt and naming path: the
// history is never silently reset, because an empty history would let
// FindConsistentPoint truncate the whole log. The directory holding path
// must exist before the first mutation (Open does not create it).
func Open(fsys vfs.FS, path string) (*History, error) {
	h := &History{fsys: fsys, path: path}
	data, err := meta.ReadFile(fsys, path)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return h, nil
		}
		return nil, fmt.Errorf("epoch: load %s: %w", path, err)
	}
	entries, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("epoch: %s: %w", path, err)
	}
	h.entries = entries
	return h, nil
}

// Path returns the file the history is stored in.
func (h *History) Path() string { return h.path }

// Entries returns a copy of the history, oldest first.
func (h *History) Entries() []Entry {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return slices.Clone(h.entries)
}

// Last returns the newest entry; ok is false if the history is empty.
func (h *History) Last() (e Entry, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if len(h.entries) == 0 {
		return Entry{}, false
	}
	return h.entries[len(h.entries)-1], true
}

// Find returns the entry of epoch; ok is false if the history has none.
func (h *History) Find(epoch int32) (e Entry, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if i := find(h.entries, epoch); i >= 0 {
		return h.entries[i], true
	}
	return Entry{}, false
}

// EpochAt returns the entry whose range holds the log offset: the newest
// entry with StartOffset <= offset. Empty epochs are therefore never
// returned unless they are the last entry. ok is false if the history is
// empty or offset is below the first entry's start. The last entry's range
// is open-ended: EpochAt does not know the log end, so callers must check
// offset < log end themselves.
func (h *History) EpochAt(offset int64) (e Entry, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	i, found := slices.BinarySearchFunc(h.entries, offset, func(e Entry, off int64) int {
		if e.StartOffset <= off {
			return -1
		}
		return 1
	})
	_ = found // never true: the comparison never returns 0
	if i == 0 {
		return Entry{}, false
	}
	return h.entries[i-1], true
}

// EndOf returns the end offset (exclusive) of epoch: the next entry's start
// offset, or logEnd if epoch is the last entry. ok is false if the history
// has no such epoch.
func (h *History) EndOf(epoch int32, logEnd int64) (end int64, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	i := find(h.entries, epoch)
	if i < 0 {
		return 0, false
	}
	return endOf(h.entries, i, logEnd), true
}

// Append adds e as the newest entry. e.Epoch must be greater than the last
// entry's epoch and e.StartOffset at least the last entry's start (an equal
// start makes the previous last entry an empty epoch; it replaces nothing).
// Appending an entry equal to the last one is a no-op returning nil, so a
// leader can re-announce its epoch after a restart. Other violations return
// an error wrapping ErrInvalid; a failed write returns the write error. In
// both cases nothing changes.
func (h *History) Append(e Entry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.entries); n > 0 && h.entries[n-1] == e {
		return nil
	}
	next := append(slices.Clone(h.entries), e)
	if err := Validate(next); err != nil {
		return fmt.Errorf("epoch: append %v: %w", e, err)
	}
	return h.storeLocked(next)
}

// TruncateSuffix adjusts the history to a log truncated to offset (the log
// now ends at offset). Entries whose StartOffset is greater than offset are
// dropped. An entry starting exactly at offset is kept: it is an epoch that
// began at the new log end and holds no record yet, which stays true (a
// leader that appended its epoch and crashed before writing keeps its term).
// A follower that truncates to a consistent point should instead adopt the
// leader's view with Reset(Clip(leader, point)); see FindConsistentPoint.
// offset must be >= 0.
func (h *History) TruncateSuffix(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("epoch: truncate suffix to %d: %w: negative offset", offset, ErrInvalid)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	next := Clip(h.entries, offset)
	if len(next) == len(h.entries) {
		return nil
	}
	return h.storeLocked(next)
}

// TruncatePrefix adjusts the history to a log whose head was deleted, so
// that its first offset is now minOffset. Entries wholly below minOffset —
// those whose range ends at or before minOffset — are dropped; the entry
// whose range holds minOffset, and every later one, are kept. The last
// entry is never dropped. Kept entries keep their StartOffset even if it is
// below minOffset: the pair (epoch, start) is the epoch's identity that
// FindConsistentPoint matches against other logs.
func (h *History) TruncatePrefix(minOffset int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	drop := 0
	for drop+1 < len(h.entries) && h.entries[drop+1].StartOffset <= minOffset {
		drop++
	}
	if drop == 0 {
		return nil
	}
	return h.storeLocked(slices.Clone(h.entries[drop:]))
}

// Reset replaces the whole history with entries, which must be valid
// (Validate); otherwise the error wraps ErrInvalid and nothing changes.
func (h *History) Reset(entries []Entry) error {
	if err := Validate(entries); err != nil {
		return fmt.Errorf("epoch: reset: %w", err)
	}
	next := slices.Clone(entries)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.storeLocked(next)
}

// storeLocked writes next to the file and, on success, makes it the
// history. mu must be held for writing.
func (h *History) storeLocked(next []Entry) error {
	if err := meta.WriteFileAtomic(h.fsys, h.path, Marshal(next)); err != nil {
		return fmt.Errorf("epoch: write %s: %w", h.path, err)
	}
	h.entries = next
	return nil
}

// Clip returns a copy of the entries of a history that describe a log
// ending at offset: those with StartOffset <= offset.
func Clip(entries []Entry, offset int64) []Entry {
	n := 0
	for n < len(entries) && entries[n].StartOffset <= offset {
		n++
	}
	return slices.Clone(entries[:n])
}

// ErrNoConsistentPoint is wrapped by FindConsistentPoint's error when the
// two histories share no epoch with the same start offset: the logs have
// nothing in common that can be proven, and an operator must decide.
var ErrNoConsistentPoint = errors.New("no consistent point between epoch histories")

// FindConsistentPoint returns the offset up to which the local log (history
// local, ending at localEnd) and the remote log (remote, ending at
// remoteEnd) are known to hold the same records, so that the local log can
// be truncated to it before copying from the remote. It is RocketMQ's
// algorithm (EpochFileCache.findConsistentPoint): walk the local epochs
// from newest to oldest; at the first one that the remote history has with
// an equal start offset, the point is min(its local end, its remote end),
// where an epoch's end is the next entry's start, or the log end for the
// last entry. Both logs then agree on every offset below the point, assuming
// (as RocketMQ does) that equal epochs with equal starts hold equal records.
//
// If local is empty the point is 0 (there is nothing local to keep). If no
// epoch matches — including a non-empty local history against an empty
// remote one — the error wraps ErrNoConsistentPoint and summarises both
// histories. Histories that break the rules (Validate), or a log end below
// its last entry's start, give an error wrapping ErrInvalid.
//
// A follower that truncated its log to the point should then take the
// leader's history up to it, h.Reset(Clip(remote, point)), so that the
// epochs the leader streams next always follow its own last entry.
func FindConsistentPoint(local []Entry, localEnd int64, remote []Entry, remoteEnd int64) (int64, error) {
	if err := checkLog("local", local, localEnd); err != nil {
		return 0, err
	}
	if err := checkLog("remote", remote, remoteEnd); err != nil {
		return 0, err
	}
	if len(local) == 0 {
		return 0, nil
	}
	for i := len(local) - 1; i >= 0; i-- {
		e := local[i]
		j := find(remote, e.Epoch)
		if j < 0 || remote[j].StartOffset != e.StartOffset {
			continue
		}
		return min(endOf(local, i, localEnd), endOf(remote, j, remoteEnd)), nil
	}
	return 0, fmt.Errorf("epoch: find consistent point: %w: local %s end %d; remote %s end %d",
		ErrNoConsistentPoint, summarise(local), localEnd, summarise(remote), remoteEnd)
}

func checkLog(side string, entries []Entry, end int64) error {
	if err := Validate(entries); err != nil {
		return fmt.Errorf("epoch: find consistent point: %s history: %w", side, err)
	}
	if end < 0 {
		return fmt.Errorf("epoch: find consistent point: %w: %s log end %d is negative", ErrInvalid, side, end)
	}
	if n := len(entries); n > 0 && end < entries[n-1].StartOffset {
		return fmt.Errorf("epoch: find consistent point: %w: %s log end %d is below the start of its last epoch %v (truncate the history with the log)",
			ErrInvalid, side, end, entries[n-1])
	}
	return nil
}

// summarise formats a history for an error, eliding the middle of long ones.
func summarise(entries []Entry) string {
	const keep = 4
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range entries {
		if len(entries) > 2*keep && i == keep {
			fmt.Fprintf(&b, " ...%d more...", len(entries)-2*keep)
		}
		if len(entries) > 2*keep && i >= keep && i < len(entries)-keep {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.String())
	}
	b.WriteByte(']')
	return b.String()
}
