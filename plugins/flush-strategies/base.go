package flushstrategies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/sdk"
)

// slog levels as sdk.Host.Log takes them.
const (
	levelInfo  = 0
	levelWarn  = 4
	levelError = 8
)

// errorLogEvery bounds how often the same failure is logged again.
const errorLogEvery = 10 * time.Second

// base holds what every strategy shares: the lifecycle, the instrumented
// Flush and Commit calls, error back-off and the metrics.
type base struct {
	name string

	lifeMu  sync.Mutex
	started bool
	stopped bool
	host    sdk.Host
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	flushedAt   *atomic.Int64 // last flushed offset this strategy saw (the metrics read it)
	committedAt atomic.Int64  // last committed offset Commit returned
	metrics

	errMu      sync.Mutex
	lastErr    string
	lastErrAt  time.Time
	lastLogged time.Time
}

func newBase(name string) base {
	flushedAt := new(atomic.Int64)
	return base{name: name, flushedAt: flushedAt, metrics: newMetrics(name, flushedAt)}
}

// checkConfigurable fails when Configure comes after Start.
func (b *base) checkConfigurable() error {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	if b.started {
		return fmt.Errorf("configure %s flush strategy: already started", b.name)
	}
	return nil
}

// start records host and runs each loop in its own goroutine until stop.
func (b *base) start(ctx context.Context, host sdk.Host, loops ...func(context.Context)) error {
	if host == nil {
		return fmt.Errorf("start %s flush strategy: nil host", b.name)
	}
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	if b.started {
		return fmt.Errorf("start %s flush strategy: already started", b.name)
	}
	p, err := host.Positions(ctx)
	if err != nil {
		return fmt.Errorf("start %s flush strategy: read positions: %w", b.name, err)
	}
	b.flushedAt.Store(p.Flushed)
	b.committedAt.Store(p.Committed)
	b.host = host
	b.started = true
	// The loops outlive Start's ctx: they end when Stop cancels this one.
	lctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	for _, loop := range loops {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			loop(lctx)
		}()
	}
	return nil
}

// stop ends the loops, waits for them, then runs final (the last commit
// and flush) with ctx. A failure of final is logged through the host and
// counted, not returned: the strategy has stopped either way, and the
// store's own Close flushes once more and reports. It is idempotent; stop
// without start does nothing.
func (b *base) stop(ctx context.Context, final func(context.Context) error) error {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	if !b.started || b.stopped {
		b.stopped = true
		return nil
	}
	b.stopped = true
	b.cancel()
	b.wg.Wait()
	if final == nil {
		return nil
	}
	// Best effort: flush and commit log and count their own failures, and
	// the host's Close of the store flushes again and reports there.
	_ = final(ctx)
	return nil
}

// flush calls Host.Flush and records its latency and size.
func (b *base) flush(ctx context.Context) (int64, error) {
	t0 := time.Now()
	f, err := b.host.Flush(ctx)
	if err != nil {
		b.fail(ctx, "flush", err)
		return f, err
	}
	if b.advance(f) {
		b.latency.UpdateDuration(t0)
	}
	return f, nil
}

// flushAfter is one group-commit round through sdk.FlushAfterer, counted
// as flush counts one. Its duration includes the wait for appends, so it
// is not put in the flush latency histogram (the host's own
// keel_flush_duration_seconds times the fdatasync).
func (b *base) flushAfter(ctx context.Context, fa sdk.FlushAfterer, after int64) (int64, error) {
	f, err := fa.FlushAfter(ctx, after)
	if err != nil {
		if !errors.Is(err, sdk.ErrNotSupported) && ctx.Err() == nil {
			b.fail(ctx, "flush after appends", err)
		}
		return f, err
	}
	b.advance(f)
	return f, nil
}

// advance records a flush that reached f: one flush and its batch, when
// f is beyond the last recorded flushed offset (false otherwise).
func (b *base) advance(f int64) bool {
	prev := b.flushedAt.Load()
	if f <= prev || !b.flushedAt.CompareAndSwap(prev, f) {
		return false
	}
	b.flushes.Inc()
	b.batch.Update(float64(f - prev))
	b.flushedBytes.AddInt64(f - prev)
	return true
}

// commit calls Host.Commit and records it.
func (b *base) commit(ctx context.Context) (int64, error) {
	c, err := b.host.Commit(ctx)
	if err != nil {
		b.fail(ctx, "commit", err)
		return c, err
	}
	if c > b.committedAt.Load() {
		b.commits.Inc()
		b.committedAt.Store(c)
	}
	return c, nil
}

// fail counts err and logs it through the host, at most once per
// errorLogEvery for a repeated error. Errors caused by ctx ending (Stop)
// are neither counted nor logged.
func (b *base) fail(ctx context.Context, what string, err error) {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	b.errors.Inc()
	now := time.Now()
	msg := err.Error()
	b.errMu.Lock()
	log := msg != b.lastErr || now.Sub(b.lastLogged) >= errorLogEvery
	b.lastErr, b.lastErrAt = msg, now
	if log {
		b.lastLogged = now
	}
	host := b.host
	b.errMu.Unlock()
	if log && host != nil {
		host.Log(ctx, levelError, what+" failed", map[string]string{"strategy": b.name, "err": msg})
	}
}

// pause sleeps after a failure, doubling *backoff from 1 ms up to 1 s. It
// returns false when ctx ended.
func pause(ctx context.Context, backoff *time.Duration) bool {
	switch {
	case *backoff == 0:
		*backoff = time.Millisecond
	case *backoff < time.Second:
		*backoff = min(2**backoff, time.Second)
	}
	return sleep(ctx, *backoff)
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// statusOf is the JSON object Status returns.
type statusOf struct {
	Strategy       string  `json:"strategy"`
	Config         any     `json:"config"`
	Policy         policyJ `json:"ack_policy"`
	Running        bool    `json:"running"`
	Flushes        uint64  `json:"flushes"`
	Commits        uint64  `json:"commits"`
	FlushedBytes   int64   `json:"flushed_bytes"`
	FlushedOffset  int64   `json:"flushed_offset"`
	P50FlushMicros float64 `json:"flush_latency_p50_us"`
	P99FlushMicros float64 `json:"flush_latency_p99_us"`
	Errors         uint64  `json:"errors"`
	LastError      string  `json:"last_error,omitempty"`
	LastErrorAt    string  `json:"last_error_at,omitempty"`
	Extra          any     `json:"extra,omitempty"`
}

type policyJ struct {
	WaitFlush         bool   `json:"wait_flush"`
	Timeout           string `json:"timeout,omitempty"`
	VisibleAfterFlush bool   `json:"visible_after_flush"`
	WriteBuffer       bool   `json:"write_buffer"`
}

func (b *base) status(cfg any, p sdk.FlushPolicy, extra any) ([]byte, error) {
	b.lifeMu.Lock()
	running := b.started && !b.stopped
	b.lifeMu.Unlock()
	lat := b.latencyBuckets()
	st := statusOf{
		Strategy: b.name, Config: cfg, Running: running,
		Policy:         policyJ{WaitFlush: p.WaitFlush, VisibleAfterFlush: p.VisibleAfterFlush, WriteBuffer: p.WriteBuffer},
		Flushes:        b.flushes.Get(),
		Commits:        b.commits.Get(),
		FlushedBytes:   int64(b.flushedBytes.Get()),
		FlushedOffset:  b.flushedAt.Load(),
		P50FlushMicros: lat.quantile(0.5) * 1e6,
		P99FlushMicros: lat.quantile(0.99) * 1e6,
		Errors:         b.errors.Get(),
		Extra:          extra,
	}
	if p.Timeout > 0 {
		st.Policy.Timeout = p.Timeout.String()
	}
	b.errMu.Lock()
	st.LastError = b.lastErr
	if !b.lastErrAt.IsZero() {
		st.LastErrorAt = b.lastErrAt.UTC().Format(time.RFC3339Nano)
	}
	b.errMu.Unlock()
	return json.Marshal(st)
}
