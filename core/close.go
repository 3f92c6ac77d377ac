package core

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Close stops the background work, flushes everything, dispatches what the
// policy allows, writes a final checkpoint and removes the abort marker so
// the next Open reads only the tail.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	close(s.stop)
	s.dispatchedN.notify()
	s.wg.Wait()
	var errs []error
	s.Commit()
	if !s.readOnly.Load() {
		if _, err := s.Flush(); err != nil {
			errs = append(errs, err)
		}
	}
	s.flushWait.ReleaseAll() // OnFlushed callbacks beyond the last flush learn it will not come
	// Dispatch whatever is visible so queues are complete.
	for {
		n, err := s.dispatchOnce()
		if err != nil {
			errs = append(errs, err)
			break
		}
		if n == 0 {
			break
		}
	}
	if err := s.Checkpoint(); err != nil {
		errs = append(errs, err)
	}
	if err := s.meta.PersistAll(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && !s.readOnly.Load() {
		if err := s.fs.Remove(filepath.Join(s.dir, AbortFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove abort marker: %w", err))
		} else if err := s.fs.SyncDir(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("sync store dir: %w", err))
		}
	}
	s.discardPrealloc()
	if err := s.closeFiles(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Store) closeFiles() error {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	var errs []error
	for _, seg := range *s.segs.Load() {
		if err := seg.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cqs != nil {
		if err := s.cqs.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.ckpt != nil {
		if err := s.ckpt.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// abandon stops the store's goroutines without flushing, checkpointing or
// closing files cleanly, as a process crash would. Tests use it before a
// simulated power cut.
func (s *Store) abandon() {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	close(s.stop)
	s.wg.Wait()
	s.discardPrealloc()
	s.closeFiles()
}
