package core

import (
	"path/filepath"
	"sync"
)

// preallocator creates the next segment in the background so a roll
// normally only swaps pointers.
type preallocator struct {
	s       *Store
	mu      sync.Mutex
	ready   *segment
	running bool
	wg      sync.WaitGroup
}

// take returns the segment starting at start, creating it synchronously if
// the background creation has not produced it.
func (p *preallocator) take(start int64) (*segment, error) {
	r := p.takeReady()
	if r != nil && r.start == start {
		return r, nil
	}
	if r != nil {
		r.remove(p.s.fs)
	}
	// A leftover file of that name (from a crash) is reused if it is whole.
	path := filepath.Join(p.s.cl, segmentName(start))
	if _, err := p.s.fs.Stat(path); err == nil {
		if seg, err := openSegment(p.s.fs, path, start, p.s.opts.SegmentSize); err == nil {
			return seg, nil
		}
		p.s.fs.Remove(path)
	}
	return createSegment(p.s.fs, p.s.cl, start, p.s.opts.SegmentSize)
}

// ahead starts creating the segment at start in the background.
func (p *preallocator) ahead(start int64) {
	p.mu.Lock()
	if p.running || (p.ready != nil && p.ready.start == start) || p.s.closed.Load() {
		p.mu.Unlock()
		return
	}
	p.running = true
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		seg, err := createSegment(p.s.fs, p.s.cl, start, p.s.opts.SegmentSize)
		p.mu.Lock()
		p.running = false
		if err != nil {
			p.mu.Unlock()
			p.s.log.Warn("preallocating next segment failed; will retry on roll", "start", start, "err", err)
			return
		}
		if p.ready != nil {
			p.ready.remove(p.s.fs)
		}
		p.ready = seg
		p.mu.Unlock()
	}()
}

// takeReady waits for a background creation to finish and takes the
// segment it produced, if any.
func (p *preallocator) takeReady() *segment {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.ready
	p.ready = nil
	return r
}

func (p *preallocator) discard() {
	if r := p.takeReady(); r != nil {
		r.close()
	}
}

// discardRemove drops the preallocated segment and deletes its file, for
// when the log moved back (truncation) and the file would leave a hole.
func (p *preallocator) discardRemove() error {
	r := p.takeReady()
	if r == nil {
		return nil
	}
	if err := r.remove(p.s.fs); err != nil {
		return err
	}
	return p.s.fs.SyncDir(p.s.cl)
}

// discardPrealloc drops the preallocated segment while no append runs (an
// append may be starting a background preallocation).
func (s *Store) discardPrealloc() {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.pre.discard()
}
