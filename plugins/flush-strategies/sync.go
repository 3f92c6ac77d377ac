package flushstrategies

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/sdk"
)

// syncStrategy is group commit: one flusher goroutine loops
// WaitCommitted(last flushed) → Flush, so every append that arrives while an
// fdatasync runs joins the next one.
type syncStrategy struct {
	base
	cfg SyncConfig
}

// NewSync returns the "sync" strategy: group commit, RocketMQ's
// GroupCommitService. Its AckPolicy is WaitFlush with a 5 s Timeout
// (configurable as timeout) and VisibleAfterFlush: a producer's ack is
// released by the host when the flushed offset passes its record, and
// consumers see only durable records.
//
// The flusher never sleeps on a timer: it waits for the committed offset to
// pass the last flushed one, flushes, and repeats. An append that arrives
// during an fdatasync is covered by the next, so the batch size follows the
// number of waiting producers (about half of them per fdatasync under a
// closed loop) with no tuning.
//
// A failed Flush (the store turns read-only after an fdatasync error) is
// logged through the host and retried with back-off from 1 ms to 1 s;
// waiting producers get FLUSH_DISK_TIMEOUT from the host meanwhile.
func NewSync() sdk.FlushStrategy {
	return &syncStrategy{base: newBase(NameSync), cfg: defaultSyncConfig()}
}

// Configure implements sdk.Plugin: keys timeout.
func (s *syncStrategy) Configure(ctx context.Context, cfg sdk.Config) error {
	if err := s.checkConfigurable(); err != nil {
		return err
	}
	c := defaultSyncConfig()
	if err := decodeConfig(cfg, &c); err != nil {
		return err
	}
	if err := c.validate(cfg); err != nil {
		return err
	}
	s.cfg = c
	return nil
}

// AckPolicy implements sdk.FlushStrategy.
func (s *syncStrategy) AckPolicy() sdk.FlushPolicy {
	return sdk.FlushPolicy{WaitFlush: true, Timeout: s.cfg.Timeout.D(), VisibleAfterFlush: true}
}

// Start implements sdk.Plugin.
func (s *syncStrategy) Start(ctx context.Context, host sdk.Host) error {
	return s.start(ctx, host, s.run)
}

// Stop implements sdk.Plugin: the flusher exits, then everything committed
// is flushed once more so no waiting producer is left behind (best effort:
// a failure is logged and counted, and Stop returns nil; the store's Close
// reports it again).
func (s *syncStrategy) Stop(ctx context.Context) error {
	return s.stop(ctx, func(ctx context.Context) error { _, err := s.flush(ctx); return err })
}

func (s *syncStrategy) run(ctx context.Context) {
	last := s.flushedAt.Load()
	var backoff time.Duration
	for ctx.Err() == nil {
		if _, err := s.host.WaitCommitted(ctx, last); err != nil {
			s.fail(ctx, "wait for appends", err)
			if !pause(ctx, &backoff) {
				return
			}
			continue
		}
		f, err := s.flush(ctx)
		if err != nil {
			if !pause(ctx, &backoff) {
				return
			}
			continue
		}
		backoff = 0
		last = f
	}
}

// Status implements sdk.StatusReporter.
func (s *syncStrategy) Status(ctx context.Context) ([]byte, error) {
	return s.status(s.cfg, s.AckPolicy(), nil)
}

// WriteMetrics implements sdk.MetricsWriter.
func (s *syncStrategy) WriteMetrics(ctx context.Context) ([]byte, error) {
	return s.metrics(nil), nil
}

// adaptiveStrategy is group commit that, when many producers are waiting,
// holds a flush back for up to MaxWait so the producers the previous flush
// released can join it.
type adaptiveStrategy struct {
	base
	cfg      AdaptiveConfig
	holds    atomic.Uint64
	heldNs   atomic.Int64
	prevSize int64 // bytes of the previous flush; flusher goroutine only
}

// NewAdaptive returns the "adaptive" strategy: the sync strategy's group
// commit and AckPolicy, plus a batching delay. When the flusher wakes to
// find at least min_pending_bytes already waiting (the mark of many
// concurrent producers), it expects the producers released by the previous
// flush to append again at once, and waits up to max_wait for the backlog
// to reach the previous batch plus the current one, ending the wait as soon
// as no append arrives for idle_gap. With few producers it behaves exactly
// as sync. It trades up to max_wait of latency for fewer, larger
// fdatasyncs (PostgreSQL's commit_delay idea).
func NewAdaptive() sdk.FlushStrategy {
	return &adaptiveStrategy{base: newBase(NameAdaptive), cfg: defaultAdaptiveConfig()}
}

// Configure implements sdk.Plugin: keys timeout, max_wait, idle_gap,
// min_pending_bytes.
func (s *adaptiveStrategy) Configure(ctx context.Context, cfg sdk.Config) error {
	if err := s.checkConfigurable(); err != nil {
		return err
	}
	c := defaultAdaptiveConfig()
	if err := decodeConfig(cfg, &c); err != nil {
		return err
	}
	if err := c.validate(cfg); err != nil {
		return err
	}
	s.cfg = c
	return nil
}

// AckPolicy implements sdk.FlushStrategy (as sync).
func (s *adaptiveStrategy) AckPolicy() sdk.FlushPolicy {
	return sdk.FlushPolicy{WaitFlush: true, Timeout: s.cfg.Timeout.D(), VisibleAfterFlush: true}
}

// Start implements sdk.Plugin.
func (s *adaptiveStrategy) Start(ctx context.Context, host sdk.Host) error {
	return s.start(ctx, host, s.run)
}

// Stop implements sdk.Plugin (as sync).
func (s *adaptiveStrategy) Stop(ctx context.Context) error {
	return s.stop(ctx, func(ctx context.Context) error { _, err := s.flush(ctx); return err })
}

func (s *adaptiveStrategy) run(ctx context.Context) {
	last := s.flushedAt.Load()
	var backoff time.Duration
	for ctx.Err() == nil {
		c, err := s.host.WaitCommitted(ctx, last)
		if err != nil {
			s.fail(ctx, "wait for appends", err)
			if !pause(ctx, &backoff) {
				return
			}
			continue
		}
		if pending := c - last; pending >= s.cfg.MinPendingBytes && s.prevSize > 0 {
			s.hold(ctx, c, last+pending+s.prevSize)
		}
		f, err := s.flush(ctx)
		if err != nil {
			if !pause(ctx, &backoff) {
				return
			}
			continue
		}
		backoff = 0
		s.prevSize = f - last
		last = f
	}
}

// hold waits until the committed offset reaches target, MaxWait passes,
// or no append arrives for IdleGap.
func (s *adaptiveStrategy) hold(ctx context.Context, c, target int64) {
	t0 := time.Now()
	deadline := t0.Add(s.cfg.MaxWait.D())
	for c < target {
		gap := min(s.cfg.IdleGap.D(), time.Until(deadline))
		if gap <= 0 {
			break
		}
		wctx, cancel := context.WithTimeout(ctx, gap)
		n, err := s.host.WaitCommitted(wctx, c)
		cancel()
		if err != nil {
			break
		}
		c = n
	}
	s.holds.Add(1)
	s.heldNs.Add(int64(time.Since(t0)))
}

// Status implements sdk.StatusReporter.
func (s *adaptiveStrategy) Status(ctx context.Context) ([]byte, error) {
	return s.status(s.cfg, s.AckPolicy(), map[string]any{
		"holds": s.holds.Load(), "held_seconds": time.Duration(s.heldNs.Load()).Seconds(),
	})
}

// WriteMetrics implements sdk.MetricsWriter.
func (s *adaptiveStrategy) WriteMetrics(ctx context.Context) ([]byte, error) {
	return s.metrics(func(sb *strings.Builder, labels string) {
		sb.WriteString("# HELP keel_flush_adaptive_holds_total Flushes held back to grow the batch.\n# TYPE keel_flush_adaptive_holds_total counter\n")
		sb.WriteString("keel_flush_adaptive_holds_total{" + labels + "} " + itoa(int64(s.holds.Load())) + "\n")
		sb.WriteString("# HELP keel_flush_adaptive_held_seconds_total Time flushes were held back.\n# TYPE keel_flush_adaptive_held_seconds_total counter\n")
		sb.WriteString("keel_flush_adaptive_held_seconds_total{" + labels + "} " + ftoa(time.Duration(s.heldNs.Load()).Seconds()) + "\n")
	}), nil
}
