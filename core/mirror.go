package core

import (
	"sync"
	"sync/atomic"
)

// mirrors are the functions MirrorCommitted registered.
type mirrors struct {
	mu  sync.Mutex
	fns map[*func(int64)]struct{}
	on  atomic.Bool // len(fns) > 0: the commit path's check without mu
}

// MirrorCommitted calls fn with the committed offset now, then after every
// change to it, until stop is called; stop returns once no call of fn is
// running or will start. It exists so the committed offset can be
// published where another process reads it (an external plugin's shared
// page) without a call per commit.
//
// Contract:
//   - fn is called with the store's committed offset as of the call, from
//     the goroutine that changed it, while that goroutine holds the
//     store's write lock: fn must be quick, must not block and must not
//     call the store.
//   - Calls never overlap. The last call after any change passes the
//     offset the change left, so once commits stop, the last value fn got
//     is the committed offset. A value fn got is never above the committed
//     offset except between a truncation's lowering of it and that
//     truncation's own call of fn, which comes before Truncate returns.
//   - Commits made while fn's registration runs may be passed to fn before
//     the initial value; a later call then brings the current one.
func (s *Store) MirrorCommitted(fn func(committed int64)) (stop func()) {
	m := &s.mirror
	key := &fn
	m.mu.Lock()
	if m.fns == nil {
		m.fns = map[*func(int64)]struct{}{}
	}
	m.fns[key] = struct{}{}
	m.on.Store(true)
	fn(s.committed.Load())
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.fns, key)
			m.on.Store(len(m.fns) > 0)
			m.mu.Unlock()
		})
	}
}

// setCommitted stores the committed offset and passes it to every
// mirror. Every change of s.committed goes through it, under the lock
// that makes the change.
func (s *Store) setCommitted(off int64) {
	s.committed.Store(off)
	m := &s.mirror
	if !m.on.Load() {
		return
	}
	m.mu.Lock()
	c := s.committed.Load()
	for fn := range m.fns {
		(*fn)(c)
	}
	m.mu.Unlock()
}
