// Package engine runs one benchmark cell: the real core store in-process
// under one combination of flush strategy, replication and index, with P
// producer goroutines (and, for produce-consume, one consumer per queue),
// for a warmup and a measured window, and reports throughput, ack latency,
// CPU cost, fsync rate, statuses and replication lag.
//
// Each axis value is looked up in a registry (RegisterFlush,
// RegisterReplication, RegisterIndex) by name and plugin mode. This package
// registers emulations of the builtin strategies ("emulated"); when the
// real plugins are available the bench package registers them over the
// emulations ("plugin"), and the cell's Impl says which ran. A name or mode
// with nothing registered fails with ErrUnavailable and the cell is
// reported as skipped.
package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Producer statuses, as RocketMQ's SendStatus names them, plus ERROR.
const (
	StatusOK                = "SEND_OK"
	StatusFlushDiskTimeout  = "FLUSH_DISK_TIMEOUT"
	StatusFlushSlaveTimeout = "FLUSH_SLAVE_TIMEOUT"
	StatusSlaveNotAvailable = "SLAVE_NOT_AVAILABLE"
	StatusError             = "ERROR"
)

// ErrUnavailable means the cell cannot run here (nothing is registered for
// one of its axis values in its mode); it is reported as skipped.
var ErrUnavailable = errors.New("cell not available")

// DefaultTopic is the topic benchmark messages go to.
const DefaultTopic = "BenchTopic"

// Spec describes one run of one cell.
type Spec struct {
	Cell matrix.Cell
	// Dir is a scratch directory for this run; it is created and removed
	// afterwards.
	Dir         string
	Warmup      time.Duration
	Duration    time.Duration
	SegmentSize int64
	// Queues of the topic; producer i writes queue i mod Queues. Default 8.
	Queues int
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// Result is what one run measured. Counts cover only acks whose append
// started inside the measured window.
type Result struct {
	// Impl says what ran for each axis: "flush=emulated repl=none
	// index=plugin".
	Impl        string
	Msgs        int64
	Elapsed     time.Duration
	MsgsPerSec  float64
	MBPerSec    float64 // payload (body) bytes, 10^6 per second
	StoredMBPS  float64 // stored record bytes, header included
	RecordBytes int     // stored size of one message
	// Latency is the producer-observed ack latency (append to ack), ns.
	Latency hist.Histogram
	// CPUSecPerMillion is user+system CPU of the whole process during the
	// window, per million acked messages.
	CPUSecPerMillion float64
	Fsyncs           int64 // Host.Flush calls that made new bytes durable
	FsyncsPerSec     float64
	Statuses         map[string]int64
	// Replication lag (master committed minus acknowledged), sampled every
	// 5 ms during the window; 0 without replication.
	ReplLagMaxBytes  int64
	ReplLagMeanBytes float64
	// Consumer side (produce-consume): messages received in the window and
	// the end-to-end latency from the producer's append to the consumer's
	// read.
	Consumed      int64
	ConsumePerSec float64
	EndToEnd      hist.Histogram
}

// RecordSize is the stored size of a benchmark message with a body of
// bodyBytes (header, topic and properties included).
func RecordSize(bodyBytes int) int {
	m := benchMessage(DefaultTopic, 0, make([]byte, bodyBytes))
	b, err := record.Encode(nil, m, record.Limits{MaxMessageSize: max(bodyBytes, record.DefaultMaxMessageSize)})
	if err != nil {
		return bodyBytes
	}
	return len(b)
}

var (
	bornHost  = netip.MustParseAddrPort("127.0.0.1:50000")
	storeHost = netip.MustParseAddrPort("127.0.0.1:10911")
)

// props is a fixed-length property string: KEYS and UNIQ_KEY are hex
// counters rewritten in place for every message (so every record has the
// same size and the index sees distinct keys).
const (
	propsTemplate = "KEYS\x01................\x02UNIQ_KEY\x01................................\x02WAIT\x01true\x02"
	keysAt        = len("KEYS\x01")
	uniqAt        = len("KEYS\x01................\x02UNIQ_KEY\x01")
)

func benchMessage(topic string, qid int32, body []byte) *record.Message {
	return &record.Message{Topic: topic, QueueID: qid, Body: body, Properties: []byte(propsTemplate),
		BornTimestamp: time.Now().UnixMilli(), BornHost: bornHost, StoreHost: storeHost}
}

func putHex(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = digits[v&15]
		v >>= 4
	}
}

// Retention is the retention configuration of benchmark stores: scratch
// stores on a shared disk, so appends are refused only above 99 % disk use
// (the core's default refuses above 90 %, which other data on the disk can
// reach) and nothing is deleted by age.
var Retention = core.RetentionOptions{FileReservedTime: -1, DiskMaxUsedRatio: 0.97, CleanForciblyRatio: 0.98, WarningRatio: 0.99}

// MaxMessageSize is the body limit of benchmark stores with segments of
// segmentSize: the core default, or half a segment for small segments.
func MaxMessageSize(segmentSize int64) int {
	return int(min(int64(record.DefaultMaxMessageSize), segmentSize/2))
}

// countingHost counts the flushes that made new bytes durable.
type countingHost struct {
	*storehost.Host
	flushes atomic.Int64
	last    atomic.Int64
}

func (c *countingHost) Flush(ctx context.Context) (int64, error) {
	f, err := c.Host.Flush(ctx)
	if err == nil {
		for {
			l := c.last.Load()
			if f <= l {
				break
			}
			if c.last.CompareAndSwap(l, f) {
				c.flushes.Add(1)
				break
			}
		}
	}
	return f, err
}

// FlushAfter implements sdk.FlushAfterer through the counted Flush (the
// embedded storehost's would bypass the count).
func (c *countingHost) FlushAfter(ctx context.Context, after int64) (int64, error) {
	return sdk.WaitThenFlush(ctx, c, after)
}

// confirmProxy lets the store be opened before its storehost exists.
type confirmProxy struct {
	h atomic.Pointer[storehost.Host]
}

func (c *confirmProxy) ConfirmOffset() int64 {
	if h := c.h.Load(); h != nil {
		return h.ConfirmOffset()
	}
	return 0
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Run runs one cell once.
func Run(ctx context.Context, spec Spec) (res *Result, err error) {
	c := spec.Cell
	if spec.Queues <= 0 {
		spec.Queues = 8
	}
	if spec.SegmentSize <= 0 {
		spec.SegmentSize = 128 << 20
	}
	logger := spec.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	fi, ok := LookupFlush(c.Flush, c.Mode)
	if !ok {
		return nil, fmt.Errorf("flush %q in %s mode: no implementation registered: %w", c.Flush, c.Mode, ErrUnavailable)
	}
	impl := "flush=" + fi.Impl
	var ri ReplImpl
	if c.Replication != "none" {
		if ri, ok = LookupReplication(c.Replication, c.Mode); !ok {
			return nil, fmt.Errorf("replication %q in %s mode: no implementation registered: %w", c.Replication, c.Mode, ErrUnavailable)
		}
		impl += " repl=" + ri.Impl
	} else {
		impl += " repl=none"
	}
	var ii IndexImpl
	if c.Index != "none" {
		if ii, ok = LookupIndex(c.Index, c.Mode); !ok {
			return nil, fmt.Errorf("index %q in %s mode: no implementation registered: %w", c.Index, c.Mode, ErrUnavailable)
		}
		impl += " index=" + ii.Impl
	} else {
		impl += " index=none"
	}

	if err := vfs.OS.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cell dir: %w", err)
	}
	defer func() {
		if rerr := vfs.OS.RemoveAll(spec.Dir); rerr != nil && err == nil {
			err = fmt.Errorf("remove cell dir: %w", rerr)
		}
	}()

	runner, err := fi.New()
	if err != nil {
		return nil, fmt.Errorf("make flush runner %q: %w", c.Flush, err)
	}
	fpol := runner.Policy()
	var repl Replication
	var rpol sdk.ReplicationPolicy
	renv := ReplEnv{SlaveDir: filepath.Join(spec.Dir, "slave"), StateDir: filepath.Join(spec.Dir, "repl"), SegmentSize: spec.SegmentSize, Logger: logger}
	if ri.New != nil {
		if err := vfs.OS.MkdirAll(renv.StateDir, 0o755); err != nil {
			return nil, fmt.Errorf("create replication dir: %w", err)
		}
		if repl, err = ri.New(renv); err != nil {
			return nil, fmt.Errorf("make replication %q: %w", c.Replication, err)
		}
		rpol = repl.Policy()
	}
	opts := core.Options{Dir: filepath.Join(spec.Dir, "master"), SegmentSize: spec.SegmentSize, Logger: logger, Retention: Retention,
		MaxMessageSize: MaxMessageSize(spec.SegmentSize)}
	storehost.ApplyFlushPolicy(&opts, fpol)
	proxy := &confirmProxy{}
	if rpol.VisibleAfterReplicated {
		opts.Confirm = proxy
	}
	var ix Indexer
	if ii.New != nil {
		idir := filepath.Join(spec.Dir, "index")
		if err := vfs.OS.MkdirAll(idir, 0o755); err != nil {
			return nil, fmt.Errorf("create index dir: %w", err)
		}
		if ix, err = ii.New(idir); err != nil {
			return nil, fmt.Errorf("make index %q: %w", c.Index, err)
		}
		defer ix.Close()
		opts.Listeners = []core.DispatchListener{ix}
	}
	store, err := core.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open cell store: %w", err)
	}
	storeOpen := true
	defer func() {
		if storeOpen {
			store.Close()
		}
	}()
	sh := storehost.New(store, logger)
	proxy.h.Store(sh)
	host := &countingHost{Host: sh}
	if ix != nil {
		if err := ix.Start(ctx, sh); err != nil {
			return nil, fmt.Errorf("start index %q: %w", c.Index, err)
		}
	}
	if err := runner.Start(ctx, host); err != nil {
		return nil, fmt.Errorf("start flush %q: %w", c.Flush, err)
	}
	runnerUp := true
	defer func() {
		if runnerUp {
			runner.Stop(context.Background())
		}
	}()
	if repl != nil {
		if err := repl.Start(ctx, sh, renv); err != nil {
			return nil, fmt.Errorf("start replication %q: %w", c.Replication, err)
		}
		defer func() {
			if repl != nil {
				repl.Stop(context.Background())
			}
		}()
	}

	// Prime: the first append creates the first segment (on the slave
	// too), synchronously; do it before the clock starts so the window
	// measures the steady state, not store creation.
	if repl != nil {
		// A replicating master may start fenced until its replica's
		// handshake (sdk/replication's start_fenced = "empty").
		deadline := time.Now().Add(30 * time.Second)
		for {
			fenced, why := sh.Fenced()
			if !fenced {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, fmt.Errorf("replication %q: master still fenced after 30 s: %s", c.Replication, why)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := prime(ctx, store, sh, repl != nil); err != nil {
		return nil, err
	}

	res = &Result{Impl: impl, RecordBytes: RecordSize(c.BodyBytes), Statuses: map[string]int64{}}
	start := time.Now()
	mStart := start.Add(spec.Warmup)
	mEnd := mStart.Add(spec.Duration)
	var stop atomic.Bool

	// ack waits for what the policies promise by the host's own rule
	// (storehost.Host.Ack: in-sync check, flush wait, replication wait,
	// the same timeouts), answered on done (one per producer, reused), no
	// timer or goroutine per message. A flush wait that fails because the
	// run is ending counts as an error, not a timeout.
	apol := storehost.NewAckPolicy(fpol, rpol)
	ack := func(end int64, done chan storehost.AckStatus) string {
		sh.Ack(apol, end, func(st storehost.AckStatus) { done <- st })
		st := <-done
		if st == storehost.AckFlushDiskTimeout && (store.Positions().Flushed >= end || ctx.Err() != nil) {
			return StatusError
		}
		return st.String()
	}

	type pstats struct {
		h        hist.Histogram
		msgs     int64
		statuses map[string]int64
		err      error
	}
	ps := make([]pstats, c.Producers)
	var wg sync.WaitGroup
	for p := 0; p < c.Producers; p++ {
		ps[p].statuses = map[string]int64{}
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			st := &ps[p]
			body := make([]byte, c.BodyBytes)
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
				r, err := store.Append(m)
				status := StatusOK
				if err != nil {
					status = StatusError
					if st.err == nil {
						st.err = err
					}
				} else {
					status = ack(r.End(), done)
				}
				t1 := time.Now()
				if !t0.Before(mStart) && t0.Before(mEnd) {
					st.h.Record(int64(t1.Sub(t0)))
					st.msgs++
					st.statuses[status]++
				}
				if err != nil {
					time.Sleep(time.Millisecond) // do not spin on a failing store
				}
			}
		}(p)
	}

	// Consumers.
	type cstats struct {
		h    hist.Histogram
		msgs int64
	}
	var cs []cstats
	var cwg sync.WaitGroup
	if c.Workload == matrix.WorkloadProduceConsume {
		cs = make([]cstats, spec.Queues)
		for q := 0; q < spec.Queues; q++ {
			cwg.Add(1)
			go func(q int) {
				defer cwg.Done()
				st := &cs[q]
				var off int64
				for !stop.Load() && ctx.Err() == nil {
					g, err := store.GetMessages(DefaultTopic, int32(q), off, 32, 1<<20, nil)
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
					in := !now.Before(mStart) && now.Before(mEnd)
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
			}(q)
		}
	}

	// Window: CPU, fsyncs, replication lag.
	var cpu0, cpu1 time.Duration
	var f0, f1 int64
	var lagMax int64
	var lagSum float64
	var lagN int
	sleepUntil := func(t time.Time) bool {
		select {
		case <-time.After(time.Until(t)):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if sleepUntil(mStart) {
		cpu0, f0 = cpuTime(), host.flushes.Load()
		tick := time.NewTicker(5 * time.Millisecond)
	window:
		for {
			select {
			case <-ctx.Done():
				break window
			case now := <-tick.C:
				if repl != nil {
					lag := store.Positions().Committed - sh.Replication().AckedOffset
					lagMax = max(lagMax, lag)
					lagSum += float64(lag)
					lagN++
				}
				if !now.Before(mEnd) {
					break window
				}
			}
		}
		tick.Stop()
		cpu1, f1 = cpuTime(), host.flushes.Load()
	}
	stop.Store(true)
	wg.Wait()
	cwg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

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
		res.CPUSecPerMillion = (cpu1 - cpu0).Seconds() / float64(res.Msgs) * 1e6
	}
	res.Fsyncs = f1 - f0
	res.FsyncsPerSec = float64(res.Fsyncs) / secs
	res.ReplLagMaxBytes = lagMax
	if lagN > 0 {
		res.ReplLagMeanBytes = lagSum / float64(lagN)
	}

	// Orderly teardown, reporting errors.
	var errs []error
	if repl != nil {
		errs = append(errs, repl.Stop(context.Background()))
		repl = nil
	}
	runnerUp = false
	errs = append(errs, runner.Stop(context.Background()))
	storeOpen = false
	errs = append(errs, store.Close())
	if e := errors.Join(errs...); e != nil {
		return res, fmt.Errorf("tear down cell: %w", e)
	}
	return res, nil
}

// PrimeTopic receives the one message each run appends before measuring.
const PrimeTopic = "BenchPrime"

// prime appends one message to PrimeTopic, flushes it and, with
// replication, waits until the slave has it.
func prime(ctx context.Context, store *core.Store, sh *storehost.Host, replicated bool) error {
	r, err := store.Append(benchMessage(PrimeTopic, 0, []byte("prime")))
	if err != nil {
		return fmt.Errorf("prime the store: %w", err)
	}
	if _, err := store.Flush(); err != nil {
		return fmt.Errorf("prime the store: flush: %w", err)
	}
	if replicated {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := sh.WaitReplicated(wctx, r.End()); err != nil {
			return fmt.Errorf("prime the store: wait for the slave: %w", err)
		}
	}
	return nil
}
