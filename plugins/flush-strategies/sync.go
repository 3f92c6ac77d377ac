package flushstrategies

import (
	"context"
	"errors"
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
	c, err := configure(&s.base, cfg, defaultSyncConfig())
	if err != nil {
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
	fa, oneCall := s.host.(sdk.FlushAfterer)
	for ctx.Err() == nil {
		if oneCall {
			f, err := s.flushAfter(ctx, fa, last)
			switch {
			case errors.Is(err, sdk.ErrNotSupported):
				oneCall = false // an older host: WaitCommitted, then Flush
				continue
			case err != nil:
				if !pause(ctx, &backoff) {
					return
				}
				continue
			}
			backoff = 0
			last = f
			continue
		}
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
