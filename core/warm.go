package core

// warmAhead is how far ahead of the write position the warmer prefaults.
const warmAhead = 4 << 20

// maybeWarmLocked asks the warmer to run when the write position gets
// within half the window of what is prefaulted. appendMu is held.
func (s *Store) maybeWarmLocked() {
	if s.noWarm.Load() || s.active == nil {
		return
	}
	if s.wrotePos-s.active.start+warmAhead/2 > s.active.warmed.Load() {
		select {
		case s.warmCh <- s.active:
		default: // a request is pending
		}
	}
}

func (s *Store) warmLoop() {
	for {
		select {
		case <-s.stop:
			return
		case r := <-s.writebackCh:
			r.seg.startWriteback(r.rel, r.n)
		case seg := <-s.warmCh:
			rel := s.wroteOffset() - seg.start
			if rel < 0 || rel >= s.opts.SegmentSize {
				continue
			}
			from := max(seg.warmed.Load(), rel)
			to := min(s.opts.SegmentSize, rel+warmAhead)
			if from >= to {
				continue
			}
			if !seg.warm(from, to) {
				s.noWarm.Store(true)
				s.log.Debug("mapping prefault not supported; appends fault pages in")
				continue
			}
			seg.warmed.Store(to)
		}
	}
}
