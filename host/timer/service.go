package timer

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// Log is what the service reads: the timer topic's consume queue and its
// records. *core.Store implements it.
type Log interface {
	GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(tagsCode int64) bool) (core.GetResult, error)
	ReadRecord(off int64) ([]byte, error)
	MinQueueOffset(topic string, queueID int32) int64
	MaxQueueOffset(topic string, queueID int32) int64
}

// Progress is where the service publishes the time below which every
// timer is delivered durably, so that it reaches slaves with the store's
// metadata. *meta.DelayOffsets implements it; the service uses the one key
// ProgressKey, beyond any delay level.
type Progress interface {
	Get(level int32) (offset int64, ok bool)
	Set(level int32, offset int64) error
	Persist() error
}

// ProgressKey is the delay offset table key under which the service keeps
// its delivered-before time (epoch ms); it is far above any delay level
// (schedule.MaxLevels).
const ProgressKey int32 = 1 << 30

// Config is what a Service works with. Every field but Logger and Now is
// required.
type Config struct {
	// Dir is the index's directory (<store.dir>/timer).
	Dir string
	// Precision is the width of a wheel slot; MaxDelay the longest delay
	// Rule accepts. Together they fix the wheel's size.
	Precision, MaxDelay time.Duration
	// Log holds the timer records.
	Log Log
	// Progress is read at Start and written as deliveries become durable.
	Progress Progress
	// Append writes delivered messages, all or none (the node's write path).
	Append func(msgs []*record.Message) ([]core.AppendResult, error)
	// Durable calls done(true) once the log up to end is as durable as an
	// acknowledged send, done(false) if that could not be established.
	Durable func(end int64, done func(ok bool))
	// Flush makes the log durable up to what is written.
	Flush func() error
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Timing and sizes of the service.
const (
	saveEvery   = 100 * time.Millisecond // least time between two checkpoints
	idleRecheck = 200 * time.Millisecond // an idle enqueue loop looks again this often
	retryAfter  = time.Second
	readCount   = 256
	readBytes   = 4 << 20
	walkChunk   = 1 << 16 // units of one slot held at once
	appendBatch = 128
)

// Service indexes the timer topic and delivers each timer when due. It
// runs between Start and Stop, and may be started again.
type Service struct {
	cfg  Config
	log  *slog.Logger
	prec int64 // ms

	mu  sync.Mutex               // serializes Start and Stop
	run atomic.Pointer[runState] // the running loops; nil while stopped
}

type runState struct {
	ix    *index
	stop  context.CancelFunc
	wg    sync.WaitGroup
	wake  chan struct{}
	hand  handoff        // what Appended reported, for the enqueue loop
	check record.Checker // the enqueue loop's, for records read from the log
	// walked carries each tick the delivery loop has walked, in order, to
	// the confirm loop, which moves the read tick past it once what it
	// delivered is durable.
	walked chan walkedTick
}

// walkedTick is one walked tick: the read tick may become next once the
// log is durable up to end (-1: the tick delivered nothing).
type walkedTick struct {
	next, end int64
}

// maxUnconfirmed bounds the ticks the delivery loop walks ahead of the
// durable read tick (at the default 1 s precision, about 17 minutes of
// ticks while, say, a sync master has no replica to acknowledge them).
const maxUnconfirmed = 1024

// New returns a stopped service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, log: cfg.Logger, prec: max(cfg.Precision.Milliseconds(), 1)}
}

// Rule is the put path's rule for this service's settings.
func (s *Service) Rule() Rule { return Rule{Enabled: true, MaxDelay: s.cfg.MaxDelay} }

// slots is the wheel size: two turns of the maximum delay, so that a tick
// never meets the next turn's before it is delivered.
func (s *Service) slots() int64 {
	return 2*((s.cfg.MaxDelay.Milliseconds()+s.prec-1)/s.prec) + 2
}

// Start opens the index and starts indexing and delivery. An index left by
// an earlier run on this node continues; one that is missing, or older
// than the progress in Progress (another node delivered since: this node
// was promoted), is rebuilt from the timer queue, skipping what Progress
// says was delivered.
func (s *Service) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run.Load() != nil {
		return nil
	}
	ix, fresh, err := openIndex(s.cfg.Dir, s.prec, s.slots(), s.log)
	if err != nil {
		return fmt.Errorf("open timer index: %w", err)
	}
	doneMs, shipped := s.cfg.Progress.Get(ProgressKey)
	st := ix.state()
	maxQ := s.cfg.Log.MaxQueueOffset(Topic, 0)
	if !fresh && ((shipped && st.ReadTick*s.prec < doneMs) || st.QueueOffset > maxQ) {
		s.log.Info("timer index is behind the shipped progress or the log; rebuilding", "readTick", st.ReadTick, "progressMs", doneMs)
		ix.close()
		if err := removeIndex(s.cfg.Dir); err != nil {
			return err
		}
		if ix, _, err = openIndex(s.cfg.Dir, s.prec, s.slots(), s.log); err != nil {
			return fmt.Errorf("open timer index: %w", err)
		}
		fresh = true
	}
	if fresh {
		read := floorDiv(s.cfg.Now().UnixMilli(), s.prec)
		if shipped {
			read = floorDiv(doneMs, s.prec)
		}
		ix.reset(s.cfg.Log.MinQueueOffset(Topic, 0), read, maxQ)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &runState{ix: ix, stop: stop, wake: make(chan struct{}, 1), walked: make(chan walkedTick, maxUnconfirmed)}
	for _, loop := range []func(context.Context, *runState){s.enqueueLoop, s.deliverLoop, s.confirmLoop, s.saveLoop} {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			loop(ctx, r)
		}()
	}
	s.run.Store(r)
	st = ix.state()
	s.log.Info("timer delivery started", "queueOffset", st.QueueOffset, "readTick", st.ReadTick, "rebuilt", fresh)
	return nil
}

// Stop ends the loops, flushes what was delivered and saves the index and
// the progress. Timers of a tick whose delivery was not yet durable are
// delivered again by the next Start.
func (s *Service) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.detachLocked()
	if r == nil {
		return
	}
	if err := s.save(r.ix); err != nil {
		s.log.Error("saving the timer index at stop", "err", err)
	}
	if err := r.ix.close(); err != nil {
		s.log.Error("closing the timer index", "err", err)
	}
	s.log.Info("timer delivery stopped")
}

// halt ends the run as a crash would (no save). For tests.
func (s *Service) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.detachLocked(); r != nil {
		r.ix.close()
	}
}

func (s *Service) detachLocked() *runState {
	r := s.run.Swap(nil)
	if r == nil {
		return nil
	}
	r.stop()
	r.wg.Wait()
	return r
}

// Notify tells the service a timer record was appended. It is cheap.
func (s *Service) Notify() {
	if r := s.run.Load(); r != nil {
		r.notify()
	}
}

// Appended is Notify with what was appended: res are the results of one
// append and due[i] the due time Rule.Rewrite returned for the message of
// res[i] (0: not a timer); len(due) is len(res). The enqueue loop then
// indexes those records without reading them back from the log. Call it
// after the append returned, from the goroutine that appended; it is
// cheap and never blocks on the index. Results of an append that did not
// come from this node's log, or were reported twice, are harmless only
// if they are true: each entry must be what the timer queue holds at its
// queue offset.
func (s *Service) Appended(res []core.AppendResult, due []int64) {
	r := s.run.Load()
	if r == nil {
		return
	}
	for i, d := range due {
		if d > 0 && i < len(res) {
			r.hand.put(res[i], d)
		}
	}
	r.notify()
}

func (r *runState) notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// save checkpoints the index and publishes its read tick.
func (s *Service) save(ix *index) error {
	if err := ix.save(); err != nil {
		return err
	}
	done := ix.state().ReadTick * s.prec
	if cur, ok := s.cfg.Progress.Get(ProgressKey); !ok || done > cur {
		if err := s.cfg.Progress.Set(ProgressKey, done); err != nil {
			return fmt.Errorf("record timer progress: %w", err)
		}
		if err := s.cfg.Progress.Persist(); err != nil {
			return fmt.Errorf("persist timer progress: %w", err)
		}
	}
	return nil
}

func (s *Service) saveLoop(ctx context.Context, r *runState) {
	for sleep(ctx, saveEvery) {
		if err := s.save(r.ix); err != nil {
			s.log.Warn("saving the timer index", "err", err)
		}
	}
}

// enqueueLoop reads the timer queue and indexes each record.
func (s *Service) enqueueLoop(ctx context.Context, r *runState) {
	for ctx.Err() == nil {
		wait, err := s.enqueueStep(r)
		if err != nil {
			s.log.Warn("timer indexing", "err", err)
			wait = retryAfter
		}
		if wait == 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-r.wake:
		}
		t.Stop()
	}
}

// enqueueStep indexes the timer queue from the index's queue offset: the
// records the send path handed off (Appended) while it has them in order,
// otherwise up to readCount records read from the log. It returns how long
// to wait before the next step.
func (s *Service) enqueueStep(r *runState) (time.Duration, error) {
	ix := r.ix
	off := ix.state().QueueOffset
	if n, err := s.enqueueHanded(r, off); n > 0 || err != nil {
		return 0, err
	}
	res, err := s.cfg.Log.GetMessages(Topic, 0, off, readCount, readBytes, nil)
	if err != nil {
		return 0, fmt.Errorf("read timer queue at %d: %w", off, err)
	}
	switch res.Status {
	case core.Found:
	case core.OffsetTooSmall:
		s.log.Warn("timer messages were deleted by retention before they were indexed", "from", off, "to", res.NextOffset)
		ix.skipTo(res.NextOffset)
		return 0, nil
	case core.NoMatchedMessage, core.MessageWasRemoving:
		ix.skipTo(res.NextOffset)
		return 0, nil
	default:
		return idleRecheck, nil
	}
	data := res.Data
	for _, size := range res.Sizes {
		raw := data[:size]
		data = data[size:]
		// The body's CRC is checked when the timer is delivered
		// (deliverUnits decodes the record); indexing needs the header.
		_, info, err := r.check.Check(raw, false)
		if err != nil || info.Blank {
			s.log.Error("dropping a damaged timer record", "queueOffset", off, "err", err)
			ix.skipTo(off + 1)
			return 0, nil
		}
		due, err := dueOf(info.PhysOffset, info.Properties)
		if err != nil {
			s.log.Error("dropping an undeliverable timer record", "queueOffset", info.QueueOffset, "err", err)
			ix.skipTo(info.QueueOffset + 1)
			continue
		}
		if err := ix.add(due, info.PhysOffset, size, info.QueueOffset); err == errFull {
			return retryAfter, nil
		} else if err != nil {
			return 0, fmt.Errorf("index timer record at queue offset %d: %w", info.QueueOffset, err)
		}
		off = info.QueueOffset + 1
	}
	return 0, nil
}

// enqueueHanded indexes the handed-off records from queue offset off on,
// in order, and returns how many it indexed.
func (s *Service) enqueueHanded(r *runState, off int64) (int, error) {
	var buf [readCount]handoffEntry
	es := r.hand.take(off, buf[:0])
	for i, e := range es {
		if err := r.ix.add(e.due, e.phys, e.size, off+int64(i)); err == errFull {
			return i, nil
		} else if err != nil {
			return i, fmt.Errorf("index timer record at queue offset %d: %w", off+int64(i), err)
		}
	}
	return len(es), nil
}

// deliverLoop delivers tick after tick from the read tick, each when its
// time comes, and each timer of a tick at its due time. It does not wait
// for a tick's deliveries to be durable: it hands the tick to the confirm
// loop and goes on, at most maxUnconfirmed ticks ahead of it, so that a
// master whose acknowledgements wait (a sync master without an in-sync
// replica) still delivers on time; the read tick, which is what a restart
// starts from, only passes durable ticks.
func (s *Service) deliverLoop(ctx context.Context, r *runState) {
	tick := r.ix.state().ReadTick
	for ctx.Err() == nil {
		start := time.UnixMilli(tick * s.prec)
		if d := start.Sub(s.cfg.Now()); d > 0 {
			sleep(ctx, min(d, saveEvery))
			continue
		}
		end, ok, err := s.deliverTick(ctx, r.ix, tick)
		if err != nil {
			s.log.Warn("timer delivery", "tick", tick, "err", err)
			sleep(ctx, retryAfter)
			continue
		}
		if !ok {
			return // stopped during the tick: the next run repeats it
		}
		tick++
		select {
		case r.walked <- walkedTick{next: tick, end: end}:
		case <-ctx.Done():
			return
		}
	}
}

// confirmLoop moves the read tick past each walked tick, in order, once
// the log is durable up to what the tick delivered (Config.Durable),
// asking again every retryAfter while it is not.
func (s *Service) confirmLoop(ctx context.Context, r *runState) {
	for {
		var w walkedTick
		select {
		case w = <-r.walked:
		case <-ctx.Done():
			return // unconfirmed ticks are walked again by the next run
		}
		for w.end >= 0 {
			ch := make(chan bool, 1)
			s.cfg.Durable(w.end, func(ok bool) { ch <- ok })
			var ok bool
			select {
			case ok = <-ch:
			case <-ctx.Done():
				return
			}
			if ok {
				break
			}
			if !sleep(ctx, retryAfter) {
				return
			}
		}
		r.ix.delivered(w.next)
	}
}

// deliverTick delivers tick's timers and flushes them; it returns the end
// of the last delivery (-1: none), and false if ctx ended first.
func (s *Service) deliverTick(ctx context.Context, ix *index, tick int64) (int64, bool, error) {
	pos, num, err := ix.beginWalk(tick)
	if err != nil || num == 0 {
		return -1, err == nil, err
	}
	end := int64(-1)
	units := make([]unit, 0, min(int(num), walkChunk))
	for pos >= 0 {
		u, err := ix.unitAt(pos)
		if err != nil {
			return -1, false, fmt.Errorf("walk tick %d: %w", tick, err)
		}
		units = append(units, u)
		pos = u.prev
		if len(units) == walkChunk || pos < 0 {
			e, ok, err := s.deliverUnits(ctx, units)
			if err != nil || !ok {
				return -1, false, err
			}
			end = max(end, e)
			units = units[:0]
		}
	}
	if end >= 0 {
		if err := s.cfg.Flush(); err != nil {
			s.log.Warn("flushing delivered timer messages", "err", err)
		}
	}
	return end, true, nil
}

// deliverUnits appends each unit's message at its due time, in due order;
// it returns the end of the last append (-1: none).
func (s *Service) deliverUnits(ctx context.Context, units []unit) (int64, bool, error) {
	sort.Slice(units, func(i, j int) bool { return units[i].due < units[j].due })
	end := int64(-1)
	msgs := make([]*record.Message, 0, appendBatch)
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		out, err := s.cfg.Append(msgs)
		if err != nil {
			return fmt.Errorf("deliver %d timer message(s): %w", len(msgs), err)
		}
		end = max(end, out[len(out)-1].End())
		msgs = msgs[:0]
		return nil
	}
	for _, u := range units {
		if d := time.UnixMilli(u.due).Sub(s.cfg.Now()); d > 0 {
			if err := flush(); err != nil {
				return -1, false, err
			}
			if !sleep(ctx, d) {
				return -1, false, nil
			}
		}
		raw, err := s.cfg.Log.ReadRecord(u.phys)
		var m *record.Message
		if err == nil {
			var rec *record.Record
			if rec, err = record.Decode(raw); err == nil {
				m, err = Deliver(rec)
			}
		}
		if err != nil {
			s.log.Error("dropping an undeliverable timer message", "phys", u.phys, "err", err)
			continue
		}
		msgs = append(msgs, m)
		if len(msgs) == appendBatch {
			if err := flush(); err != nil {
				return -1, false, err
			}
		}
	}
	if err := flush(); err != nil {
		return -1, false, err
	}
	return end, true, nil
}

func removeIndex(dir string) error {
	for _, name := range []string{checkpointName, wheelName, logDirName} {
		if err := removeAll(dir, name); err != nil {
			return fmt.Errorf("remove stale timer index: %w", err)
		}
	}
	return nil
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
