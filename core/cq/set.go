package cq

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/keelmq/keel/core/vfs"
)

type queueKey struct {
	topic string
	id    int32
}

// Set manages every consume queue under one root directory, laid out as
// {root}/{topic}/{queueId}/.
//
// Concurrency: Get, GetOrCreate, Each and MaxPhysOffset are safe from any
// goroutine at any time. Flush may run concurrently with everything except
// Close and RemoveAll. TruncatePhys, SetMinPhysOffset, Delete, RemoveAll and
// Close must run with dispatch paused (no Put on any queue of the set), as
// the per-queue contracts require.
type Set struct {
	opts Options
	root string

	mu     sync.RWMutex
	queues map[queueKey]*Queue
	closed bool
}

// OpenSet opens every queue found under root: each directory {topic}/{id}
// with a valid topic name and a decimal id in 0..MaxQueueID is opened (and
// recovered) with OpenQueue; other entries are ignored with a warning. root
// is created if missing. If any queue fails to open, the queues opened so
// far are closed and the error names the failing queue.
func OpenSet(opts Options, root string) (*Set, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	s := &Set{opts: opts, root: root, queues: make(map[queueKey]*Queue)}
	if err := mkdirDurable(opts.FS, root); err != nil {
		return nil, fmt.Errorf("open consume queue set: %w", err)
	}
	topics, err := opts.FS.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("open consume queue set: list %s: %w", root, err)
	}
	for _, topic := range topics {
		tdir := filepath.Join(root, topic)
		if st, err := opts.FS.Stat(tdir); err != nil {
			s.closeQueues()
			return nil, fmt.Errorf("open consume queue set: stat %s: %w", tdir, err)
		} else if !st.IsDir() {
			opts.Logger.Warn("cq: ignoring non-directory in consume queue root", "path", tdir)
			continue
		}
		if err := validateTopic(topic); err != nil {
			opts.Logger.Warn("cq: ignoring directory with invalid topic name", "path", tdir, "err", err)
			continue
		}
		ids, err := opts.FS.ReadDir(tdir)
		if err != nil {
			s.closeQueues()
			return nil, fmt.Errorf("open consume queue set: list %s: %w", tdir, err)
		}
		for _, name := range ids {
			id, err := strconv.ParseUint(name, 10, 16)
			if err != nil || strconv.FormatUint(id, 10) != name {
				opts.Logger.Warn("cq: ignoring unexpected entry in topic directory", "path", filepath.Join(tdir, name))
				continue
			}
			q, err := OpenQueue(opts, root, topic, int32(id))
			if err != nil {
				s.closeQueues()
				return nil, fmt.Errorf("open consume queue set: %w", err)
			}
			s.queues[queueKey{topic, int32(id)}] = q
		}
	}
	return s, nil
}

// mkdirDurable creates dir and any missing parents and makes their names
// durable (SyncDir of each new directory's parent).
func mkdirDurable(fsys vfs.FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		parent := filepath.Dir(missing[i])
		if err := fsys.SyncDir(parent); err != nil {
			return fmt.Errorf("sync dir %s: %w", parent, err)
		}
	}
	return nil
}

func (s *Set) closeQueues() {
	for _, q := range s.queues {
		_ = q.Close()
	}
	s.queues = map[queueKey]*Queue{}
}

// Root is the set's root directory.
func (s *Set) Root() string { return s.root }

// Get returns the queue of topic and queueID, or nil if the set has none
// (or is closed).
func (s *Set) Get(topic string, queueID int32) *Queue {
	s.mu.RLock()
	q := s.queues[queueKey{topic, queueID}]
	s.mu.RUnlock()
	return q
}

// GetOrCreate returns the queue of topic and queueID, creating it (empty,
// with no files until its first Put) if absent. The error wraps
// ErrInvalidTopic, ErrInvalidQueueID or ErrClosed.
func (s *Set) GetOrCreate(topic string, queueID int32) (*Queue, error) {
	if q := s.Get(topic, queueID); q != nil {
		return q, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	k := queueKey{topic, queueID}
	if q := s.queues[k]; q != nil {
		return q, nil
	}
	q, err := OpenQueue(s.opts, s.root, topic, queueID)
	if err != nil {
		return nil, err
	}
	s.queues[k] = q
	return q, nil
}

// snapshot returns the queues sorted by topic and id.
func (s *Set) snapshot() []*Queue {
	s.mu.RLock()
	qs := make([]*Queue, 0, len(s.queues))
	for _, q := range s.queues {
		qs = append(qs, q)
	}
	s.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].topic != qs[j].topic {
			return qs[i].topic < qs[j].topic
		}
		return qs[i].id < qs[j].id
	})
	return qs
}

// Each calls fn for every queue, ordered by topic then queue id, until fn
// returns false. It iterates over a snapshot: queues created meanwhile may
// be missed, and fn may call other Set methods.
func (s *Set) Each(fn func(*Queue) bool) {
	for _, q := range s.snapshot() {
		if !fn(q) {
			return
		}
	}
}

// Len is the number of queues in the set.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.queues)
}

// MaxPhysOffset is the largest MaxPhysOffset of any queue, 0 if none holds
// an entry. Recovery resumes dispatch from the commitlog at or below it.
func (s *Set) MaxPhysOffset() int64 {
	var m int64
	for _, q := range s.snapshot() {
		m = max(m, q.MaxPhysOffset())
	}
	return m
}

// TruncatePhys calls TruncatePhys(phys) on every queue (dispatch must be
// paused). It tries every queue and returns the errors joined.
func (s *Set) TruncatePhys(phys int64) error {
	var errs []error
	for _, q := range s.snapshot() {
		if err := q.TruncatePhys(phys); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetMinPhysOffset applies the commitlog minimum minPhys to every queue
// (see Queue.SetMinPhysOffset; dispatch must be paused). It tries every
// queue and returns the errors joined.
func (s *Set) SetMinPhysOffset(minPhys int64) error {
	var errs []error
	for _, q := range s.snapshot() {
		if _, err := q.SetMinPhysOffset(minPhys); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Flush flushes every queue. It tries every queue and returns the errors
// joined (a queue closed meanwhile is skipped).
func (s *Set) Flush() error {
	var errs []error
	for _, q := range s.snapshot() {
		if err := q.Flush(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Delete closes the queue of topic and queueID and removes its files (for
// example when a topic is deleted). The topic directory is removed too if
// it is then empty. It is not an error if the queue does not exist.
func (s *Set) Delete(topic string, queueID int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	k := queueKey{topic, queueID}
	q := s.queues[k]
	if q == nil {
		return nil
	}
	delete(s.queues, k)
	err := q.destroy()
	tdir := filepath.Join(s.root, topic)
	if names, lerr := s.opts.FS.ReadDir(tdir); lerr == nil && len(names) == 0 {
		if rerr := s.opts.FS.Remove(tdir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", tdir, rerr))
		}
	} else if lerr == nil {
		if serr := s.opts.FS.SyncDir(tdir); serr != nil {
			err = errors.Join(err, fmt.Errorf("sync dir %s: %w", tdir, serr))
		}
	}
	if serr := s.opts.FS.SyncDir(s.root); serr != nil {
		err = errors.Join(err, fmt.Errorf("sync dir %s: %w", s.root, serr))
	}
	if err != nil {
		return fmt.Errorf("delete consume queue %s/%d: %w", topic, queueID, err)
	}
	return nil
}

// Close closes every queue (flushing each). Later calls to the set return
// ErrClosed or nil results.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var errs []error
	for _, q := range s.queues {
		if err := q.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.queues = map[queueKey]*Queue{}
	return errors.Join(errs...)
}

// RemoveAll destroys every queue: it closes them without flushing and
// removes everything under root (root itself stays), for a rebuild from
// the commitlog. The set stays open and empty.
func (s *Set) RemoveAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var errs []error
	for _, q := range s.queues {
		if err := q.destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	s.queues = map[queueKey]*Queue{}
	names, err := s.opts.FS.ReadDir(s.root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("list %s: %w", s.root, err))
	}
	for _, n := range names {
		p := filepath.Join(s.root, n)
		if err := s.opts.FS.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
		}
	}
	if err := s.opts.FS.SyncDir(s.root); err != nil {
		errs = append(errs, fmt.Errorf("sync dir %s: %w", s.root, err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove all consume queues: %w", errors.Join(errs...))
	}
	return nil
}
