package flushstrategies

import (
	"context"
	"strconv"
	"time"

	"github.com/keelmq/keel/sdk"
)

// asyncStrategy flushes on a fixed cadence: RocketMQ's
// FlushRealTimeService with flushCommitLogTimed.
type asyncStrategy struct {
	base
	cfg AsyncConfig
}

// NewAsync returns the "async" strategy, RocketMQ's FlushRealTimeService:
// every interval (500 ms) it flushes if at least least_pages (4) pages of
// 4 KiB are committed but not flushed, and at least every
// thorough_interval (10 s) it flushes whatever is dirty. Its AckPolicy
// waits for nothing: the ack follows the append, and a power cut loses at
// most what was committed after the last completed flush (a process crash
// loses nothing: the bytes are in the page cache).
//
// The cadence is fixed (a ticker), never shortened by appends, so flush
// cost is bounded by 1/interval fdatasyncs per second whatever the load.
func NewAsync() sdk.FlushStrategy {
	return &asyncStrategy{base: newBase(NameAsync), cfg: defaultAsyncConfig()}
}

// Configure implements sdk.Plugin: keys interval, least_pages,
// thorough_interval.
func (s *asyncStrategy) Configure(ctx context.Context, cfg sdk.Config) error {
	c, err := configure(&s.base, cfg, defaultAsyncConfig())
	if err != nil {
		return err
	}
	s.cfg = c
	return nil
}

// AckPolicy implements sdk.FlushStrategy: acks wait for nothing.
func (s *asyncStrategy) AckPolicy() sdk.FlushPolicy { return sdk.FlushPolicy{} }

// Start implements sdk.Plugin.
func (s *asyncStrategy) Start(ctx context.Context, host sdk.Host) error {
	return s.start(ctx, host, func(ctx context.Context) {
		s.flushLoop(ctx, s.cfg.Interval.D(), s.cfg.ThoroughInterval.D(), s.cfg.LeastPages)
	})
}

// Stop implements sdk.Plugin: the flusher exits, then everything committed
// is flushed once more (best effort: a failure is logged and counted, and
// Stop returns nil; the store's Close reports it again).
func (s *asyncStrategy) Stop(ctx context.Context) error {
	return s.stop(ctx, func(ctx context.Context) error { _, err := s.flush(ctx); return err })
}

// Status implements sdk.StatusReporter.
func (s *asyncStrategy) Status(ctx context.Context) ([]byte, error) {
	return s.status(s.cfg, s.AckPolicy(), nil)
}

// flushLoop is FlushRealTimeService: every interval, flush if at least
// leastPages pages are dirty; once thorough has passed since the last
// thorough round, flush anything dirty.
func (b *base) flushLoop(ctx context.Context, interval, thorough time.Duration, leastPages int) {
	t := time.NewTicker(interval)
	defer t.Stop()
	lastThorough := time.Now()
	var backoff time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		least := int64(leastPages) * PageSize
		if now := time.Now(); now.Sub(lastThorough) >= thorough {
			least = 0
			lastThorough = now
		}
		p, err := b.host.Positions(ctx)
		if err != nil {
			b.fail(ctx, "read positions", err)
			if !pause(ctx, &backoff) {
				return
			}
			continue
		}
		if dirty := p.Committed - p.Flushed; dirty > 0 && dirty >= least {
			if _, err := b.flush(ctx); err != nil {
				if !pause(ctx, &backoff) {
					return
				}
				continue
			}
		}
		backoff = 0
	}
}

// bufferedStrategy adds a commit loop in front of the async flusher.
type bufferedStrategy struct {
	base
	cfg BufferedConfig
}

// NewBuffered returns the "buffered" strategy, RocketMQ's transient store
// pool: its AckPolicy asks the host for a write buffer (WriteBuffer), so
// appends land in memory and readers, replication and dispatch see only
// committed bytes; every commit_interval (200 ms) it moves the buffer into
// the log files (Host.Commit), and it flushes as the async strategy does
// (interval, least_pages, thorough_interval). Acks wait for nothing.
//
// A process crash loses what was not yet committed (up to commit_interval
// of appends); a power cut loses what was not yet flushed. There is no
// commit least-pages threshold: the Host API does not expose how much is
// buffered, and with RocketMQ's defaults (commitCommitLogThoroughInterval
// equal to commitIntervalCommitLog) every commit round commits everything
// anyway.
//
// On a store without a write buffer Host.Commit is a no-op and the
// strategy behaves as async.
func NewBuffered() sdk.FlushStrategy {
	return &bufferedStrategy{base: newBase(NameBuffered), cfg: defaultBufferedConfig()}
}

// Configure implements sdk.Plugin: keys commit_interval, interval,
// least_pages, thorough_interval.
func (s *bufferedStrategy) Configure(ctx context.Context, cfg sdk.Config) error {
	c, err := configure(&s.base, cfg, defaultBufferedConfig())
	if err != nil {
		return err
	}
	s.cfg = c
	return nil
}

// AckPolicy implements sdk.FlushStrategy: a write buffer, acks wait for
// nothing.
func (s *bufferedStrategy) AckPolicy() sdk.FlushPolicy { return sdk.FlushPolicy{WriteBuffer: true} }

// Start implements sdk.Plugin.
func (s *bufferedStrategy) Start(ctx context.Context, host sdk.Host) error {
	return s.start(ctx, host, s.commitLoop, func(ctx context.Context) {
		s.flushLoop(ctx, s.cfg.Interval.D(), s.cfg.ThoroughInterval.D(), s.cfg.LeastPages)
	})
}

// Stop implements sdk.Plugin: both loops exit, then the buffer is
// committed and everything flushed once more (best effort, as async's
// Stop).
func (s *bufferedStrategy) Stop(ctx context.Context) error {
	return s.stop(ctx, func(ctx context.Context) error {
		if _, err := s.commit(ctx); err != nil {
			return err
		}
		_, err := s.flush(ctx)
		return err
	})
}

// commitLoop is CommitRealTimeService: commit every CommitInterval.
func (s *bufferedStrategy) commitLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CommitInterval.D())
	defer t.Stop()
	var backoff time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.commit(ctx); err != nil {
			if !pause(ctx, &backoff) {
				return
			}
			continue
		}
		backoff = 0
	}
}

// Status implements sdk.StatusReporter.
func (s *bufferedStrategy) Status(ctx context.Context) ([]byte, error) {
	return s.status(s.cfg, s.AckPolicy(), nil)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
