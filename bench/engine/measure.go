package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk/storehost"
)

// window is the measured part of a run: acks whose append started in
// [start, end) count.
type window struct{ start, end time.Time }

func (w window) holds(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

// producerStats is what one producer counted in the window.
type producerStats struct {
	h        hist.Histogram
	msgs     int64
	statuses map[string]int64
	err      error // the first append error
}

// consumerStats is what one queue's consumer counted in the window.
type consumerStats struct {
	h    hist.Histogram
	msgs int64
}

// sample is what the window sampler measured: CPU time and fsync counts at
// both ends, and the replication lag every 5 ms.
type sample struct {
	cpu0, cpu1 time.Duration
	f0, f1     int64
	lagMax     int64
	lagSum     float64
	lagN       int
}

// measure runs the cell's producers (and, for produce-consume, one
// consumer per queue) through the warmup and the measured window, and
// returns what they measured.
func (cl *cell) measure(ctx context.Context, spec Spec, impl string) (*Result, error) {
	start := time.Now()
	w := window{start: start.Add(spec.Warmup)}
	w.end = w.start.Add(spec.Duration)
	var stop atomic.Bool

	ps := make([]producerStats, spec.Cell.Producers)
	var wg sync.WaitGroup
	for p := range ps {
		ps[p].statuses = map[string]int64{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.produce(ctx, spec, p, start, w, &stop, &ps[p])
		}()
	}
	var cs []consumerStats
	var cwg sync.WaitGroup
	if spec.Cell.Workload == matrix.WorkloadProduceConsume {
		cs = make([]consumerStats, spec.Queues)
		for q := range cs {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				cl.consume(ctx, int32(q), w, &stop, &cs[q])
			}()
		}
	}
	smp := cl.sampleWindow(ctx, w)
	stop.Store(true)
	wg.Wait()
	cwg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return summarize(spec, impl, ps, cs, smp)
}

// ack waits for what the policies promise by the host's own rule
// (storehost.Host.Ack: in-sync check, flush wait, replication wait, the
// same timeouts), answered on done (one per producer, reused): no timer or
// goroutine per message. A flush wait that fails because the run is
// ending counts as an error, not a timeout.
func (cl *cell) ack(ctx context.Context, apol storehost.AckPolicy, end int64, done chan storehost.AckStatus) string {
	cl.sh.Ack(apol, end, func(st storehost.AckStatus) { done <- st })
	st := <-done
	if st == storehost.AckFlushDiskTimeout && (cl.store.Positions().Flushed >= end || ctx.Err() != nil) {
		return StatusError
	}
	return st.String()
}

// produce is producer p: one message in flight, appended and acknowledged
// by the cell's policies, until stop.
func (cl *cell) produce(ctx context.Context, spec Spec, p int, start time.Time, w window, stop *atomic.Bool, st *producerStats) {
	apol := storehost.NewAckPolicy(cl.fpol, cl.rpol)
	body := make([]byte, spec.Cell.BodyBytes)
	for i := range body {
		body[i] = byte(i*31 + p)
	}
	m := benchMessage(DefaultTopic, int32(p%spec.Queues), body)
	done := make(chan storehost.AckStatus, 1)
	var seq uint64
	for !stop.Load() && ctx.Err() == nil {
		seq++
		id := uint64(p)<<40 | seq
		putHex(m.Properties[keysAt:keysAt+16], id)
		putHex(m.Properties[uniqAt:uniqAt+16], uint64(start.UnixNano()))
		putHex(m.Properties[uniqAt+16:uniqAt+32], id)
		t0 := time.Now()
		if len(body) >= 8 {
			binary.BigEndian.PutUint64(body, uint64(t0.UnixNano()))
		}
		r, err := cl.store.Append(m)
		status := StatusOK
		if err != nil {
			status = StatusError
			if st.err == nil {
				st.err = err
			}
		} else {
			status = cl.ack(ctx, apol, r.End(), done)
		}
		t1 := time.Now()
		if w.holds(t0) {
			st.h.Record(int64(t1.Sub(t0)))
			st.msgs++
			st.statuses[status]++
		}
		if err != nil {
			time.Sleep(time.Millisecond) // do not spin on a failing store
		}
	}
}

// consume reads queue q from the start until stop, counting the messages
// read in the window and their end-to-end latency (the producer's append
// time is the body's first 8 bytes).
func (cl *cell) consume(ctx context.Context, q int32, w window, stop *atomic.Bool, st *consumerStats) {
	store := cl.store
	var off int64
	for !stop.Load() && ctx.Err() == nil {
		g, err := store.GetMessages(DefaultTopic, q, off, 32, 1<<20, nil)
		if err != nil {
			return
		}
		if g.Status != core.Found {
			d := store.Positions().Dispatched
			wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			store.WaitDispatched(wctx, d)
			cancel()
			if g.Status == core.OffsetTooSmall || g.Status == core.OffsetOverflowBadly {
				off = g.NextOffset
			}
			continue
		}
		now := time.Now()
		in := w.holds(now)
		data := g.Data
		for _, sz := range g.Sizes {
			rec := data[:sz]
			data = data[sz:]
			if !in {
				continue
			}
			st.msgs++
			if r, err := record.Decode(rec); err == nil && len(r.Body) >= 8 {
				sent := int64(binary.BigEndian.Uint64(r.Body))
				st.h.Record(now.UnixNano() - sent)
			}
		}
		off = g.NextOffset
	}
}

// sampleWindow waits for the window to open, then samples until it
// closes (or ctx ends): CPU and fsyncs at both ends, replication lag
// every 5 ms.
func (cl *cell) sampleWindow(ctx context.Context, w window) sample {
	var s sample
	select {
	case <-time.After(time.Until(w.start)):
	case <-ctx.Done():
		return s
	}
	s.cpu0, s.f0 = cpuTime(), cl.host.flushes.Load()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.cpu1, s.f1 = cpuTime(), cl.host.flushes.Load()
			return s
		case now := <-tick.C:
			if cl.repl != nil {
				lag := cl.store.Positions().Committed - cl.sh.Replication().AckedOffset
				s.lagMax = max(s.lagMax, lag)
				s.lagSum += float64(lag)
				s.lagN++
			}
			if !now.Before(w.end) {
				s.cpu1, s.f1 = cpuTime(), cl.host.flushes.Load()
				return s
			}
		}
	}
}

// summarize merges the producers' and consumers' counts into a Result.
func summarize(spec Spec, impl string, ps []producerStats, cs []consumerStats, s sample) (*Result, error) {
	c := spec.Cell
	res := &Result{Impl: impl, RecordBytes: RecordSize(c.BodyBytes), Statuses: map[string]int64{}}
	var firstErr error
	for i := range ps {
		st := &ps[i]
		res.Latency.Merge(&st.h)
		res.Msgs += st.msgs
		for k, v := range st.statuses {
			res.Statuses[k] += v
		}
		if st.err != nil && firstErr == nil {
			firstErr = st.err
		}
	}
	if res.Msgs == 0 && firstErr != nil {
		return nil, fmt.Errorf("every append failed: %w", firstErr)
	}
	for i := range cs {
		res.EndToEnd.Merge(&cs[i].h)
		res.Consumed += cs[i].msgs
	}
	secs := spec.Duration.Seconds()
	res.Elapsed = spec.Duration
	res.MsgsPerSec = float64(res.Msgs) / secs
	res.MBPerSec = res.MsgsPerSec * float64(c.BodyBytes) / 1e6
	res.StoredMBPS = res.MsgsPerSec * float64(res.RecordBytes) / 1e6
	res.ConsumePerSec = float64(res.Consumed) / secs
	if res.Msgs > 0 {
		res.CPUSecPerMillion = (s.cpu1 - s.cpu0).Seconds() / float64(res.Msgs) * 1e6
	}
	res.Fsyncs = s.f1 - s.f0
	res.FsyncsPerSec = float64(res.Fsyncs) / secs
	res.ReplLagMaxBytes = s.lagMax
	if s.lagN > 0 {
		res.ReplLagMeanBytes = s.lagSum / float64(s.lagN)
	}
	return res, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
