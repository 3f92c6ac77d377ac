package cq

import (
	"errors"
	"fmt"
)

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
