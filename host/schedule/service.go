package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// Log is what the service reads: the schedule topic's consume queues and
// the log's positions. *core.Store implements it.
type Log interface {
	GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(tagsCode int64) bool) (core.GetResult, error)
	WaitDispatched(ctx context.Context, after int64) (int64, error)
	Positions() core.Positions
}

// Offsets is the per-level progress table: level → the schedule queue
// offset below which every record is delivered durably. *meta.DelayOffsets
// (core/meta, delayOffset.json) implements it.
type Offsets interface {
	Get(level int32) (offset int64, ok bool)
	Set(level int32, offset int64) error
	Persist() error
}

// Config is what a Service works with. Every field but Logger and Now is
// required.
type Config struct {
	// Levels is the level table; the service runs one loop per level.
	Levels Levels
	// Log holds the schedule records.
	Log Log
	// Offsets is read when the service starts and written as deliveries
	// become durable.
	Offsets Offsets
	// Append writes delivered messages to the log, all or none (the
	// node's write path: refused while the node may not take writes).
	Append func(msgs []*record.Message) ([]core.AppendResult, error)
	// Durable calls done(true) once the log up to end is as durable as an
	// acknowledged send (flushed, and replicated where the node's policy
	// waits for replicas), done(false) if that could not be established;
	// done runs once, must not block and may run on any goroutine.
	Durable func(end int64, done func(ok bool))
	// Flush, if set, makes the log durable up to what is written (the
	// store's Flush). The service calls it at most every persistEvery
	// while deliveries wait for Durable, so that their offsets advance
	// without waiting for a lazy flush strategy (async flushes a small
	// write only every 10 s), and once at Stop.
	Flush func() error
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Due times are compared with it.
	Now func() time.Time
}

// Timing of the service.
const (
	// persistEvery is the least time between two writes of the offsets
	// table, and between two Flush calls: a delivery is flushed and its
	// offset persisted within about this long of its append.
	persistEvery = 100 * time.Millisecond
	// idleRecheck is how often an idle level looks at its queue without
	// being notified (records that arrived by replication, say).
	idleRecheck = time.Second
	// retryAfter is the wait after a failed read or append, and between
	// attempts to establish a delivery's durability.
	retryAfter = time.Second
	// batchCount and batchBytes bound one read of a schedule queue.
	batchCount = 64
	batchBytes = 4 << 20
)

// Service is the delivery service: one loop per level reads the level's
// schedule queue from its offset and delivers each record when due. It
// runs between Start and Stop; a stopped service may be started again
// (after a demotion and a promotion, say), from the offsets as they are
// then.
type Service struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	run     *runState
	running atomic.Pointer[runState] // for Notify, without mu
}

// runState is one Start..Stop of the service.
type runState struct {
	levels  []*levelLoop
	stop    context.CancelFunc // ends the loops
	drained context.CancelFunc // ends durability retries (after the drain)
	wg      sync.WaitGroup
	dirty   chan struct{} // offsets changed since last persisted
	flush   chan struct{} // deliveries wait for durability
}

// New returns a stopped service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, log: cfg.Logger}
}

// Levels is the service's level table (the one Rewrite must use).
func (s *Service) Levels() Levels { return s.cfg.Levels }

// Start starts the loops, each from its level's offset in Offsets. It does
// nothing if the service is running.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run != nil {
		return
	}
	loopCtx, stop := context.WithCancel(context.Background())
	durCtx, drained := context.WithCancel(context.Background())
	r := &runState{stop: stop, drained: drained, dirty: make(chan struct{}, 1), flush: make(chan struct{}, 1)}
	for i, d := range s.cfg.Levels {
		r.levels = append(r.levels, s.newLevel(r, int32(i+1), d, durCtx))
	}
	for _, l := range r.levels {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			l.loop(loopCtx)
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		s.persistLoop(loopCtx, r)
	}()
	s.run = r
	s.running.Store(r)
	s.log.Info("delay level delivery started", "levels", s.cfg.Levels.String())
}

// Stop ends the loops, flushes the log (Config.Flush) so that deliveries
// already appended become durable, and persists the offsets. A delivery
// whose durability is still not established then (a replica has not
// acknowledged it) keeps its old offset, unless its confirmation arrives
// later (it is still recorded, and persisted with the store's metadata):
// it is delivered again by the next Start, here or on whichever node
// becomes master. Stop does nothing if the service is not running.
func (s *Service) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detachLocked() == nil {
		return
	}
	s.flush()
	if err := s.cfg.Offsets.Persist(); err != nil {
		s.log.Error("persisting delay offsets at stop", "err", err)
	}
	s.log.Info("delay level delivery stopped")
}

// halt ends the run at once, as a crash would: no flush, no persist. For
// tests.
func (s *Service) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detachLocked()
}

// detachLocked ends the current run's loops and durability retries and
// returns it; nil when the service is not running. s.mu must be held.
func (s *Service) detachLocked() *runState {
	r := s.run
	if r == nil {
		return nil
	}
	s.running.Store(nil)
	s.run = nil
	r.stop()
	r.wg.Wait()
	r.drained()
	return r
}

// Notify tells the loop of level that a schedule record ending at log
// offset end was appended, so that an idle loop reads its queue once the
// record is dispatched instead of at its next recheck. It is cheap and
// does nothing when the service is stopped or level is not in the table.
func (s *Service) Notify(level int32, end int64) {
	r := s.running.Load()
	if r == nil || level < 1 || int(level) > len(r.levels) {
		return
	}
	r.levels[level-1].notify(end)
}

func (r *runState) markDirty() { signal(r.dirty) }

// wantFlush asks the persist loop for a flush.
func (r *runState) wantFlush() { signal(r.flush) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (s *Service) flush() {
	if s.cfg.Flush == nil {
		return
	}
	if err := s.cfg.Flush(); err != nil {
		s.log.Warn("flushing delivered delayed messages", "err", err)
	}
}

// persistLoop flushes the log when deliveries wait for durability and
// persists the offsets table when it changed, at most once every
// persistEvery.
func (s *Service) persistLoop(ctx context.Context, r *runState) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.dirty:
		case <-r.flush:
			s.flush() // confirmations mark the table dirty
			select {
			case <-r.dirty:
			default:
				if !sleep(ctx, persistEvery) {
					return
				}
				continue
			}
		}
		if err := s.cfg.Offsets.Persist(); err != nil {
			s.log.Warn("persisting delay offsets", "err", err)
		}
		if !sleep(ctx, persistEvery) {
			return
		}
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (s *Service) newLevel(r *runState, level int32, delay time.Duration, durCtx context.Context) *levelLoop {
	l := &levelLoop{s: s, r: r, level: level, delay: delay, durCtx: durCtx, wake: make(chan struct{}, 1)}
	l.commit = newCommitter(func(next int64) {
		if err := s.cfg.Offsets.Set(level, next); err != nil {
			s.log.Error("recording delay offset", "level", level, "offset", next, "err", err)
			return
		}
		r.markDirty()
	})
	return l
}

// errorf wraps a loop's error with its level.
func (l *levelLoop) errorf(format string, args ...any) error {
	return fmt.Errorf("delay level %d: "+format, append([]any{l.level}, args...)...)
}
