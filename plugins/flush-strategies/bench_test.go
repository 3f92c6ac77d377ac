package flushstrategies

// Benchmarks on the real disk (t.TempDir, vfs.OS).
//
// BenchmarkCeiling is the raw group-commit ceiling of
// ../../shared/reference/benchmark-peers.md §6: G goroutines each hand one
// record (the size of the store's encoded 128-byte-body record) to one
// flusher goroutine and block until it is durable; the flusher takes
// everything pending, does one WriteAt + fdatasync to a fallocated file of
// the store's segment size (the store's segment layout), and releases
// the waiters. G=1 is the serial write+fdatasync rate.
//
// BenchmarkSync runs the same load through the store:
// Append, then wait for the flushed offset to pass the record (the host's
// sync ack), with the strategy flushing.
//
// BenchmarkSyncVsCeiling alternates short ceiling and sync phases and
// reports sync's throughput as a fraction of the ceiling's, with p50/p99
// ack latency next to the ceiling's. Run it with -benchtime=1x.
//
// BenchmarkAppend measures append throughput with no flusher, with the
// async strategy (defaults) and with the buffered strategy on a
// write-buffered store.

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

const (
	benchBody    = 128
	benchSegment = core.DefaultSegmentSize // the store's default segment layout
)

var benchGs = []int{1, 64, 256}

func benchMessage(q int) *record.Message {
	body := make([]byte, benchBody)
	rand.Read(body) // non-repeating, never all zeros
	return testMessage("BenchTopic", int32(q%4), body)
}

// benchRecordSize is the stored size of a bench message.
func benchRecordSize(tb testing.TB) int {
	n, err := record.EncodedSize(benchMessage(0))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// loadResult is what one load phase measured.
type loadResult struct {
	ops     int64
	elapsed time.Duration
	lat     []time.Duration
	syncs   int64 // fdatasync rounds that made something durable
}

func (r loadResult) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

func (r loadResult) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
}

// runLoad runs g workers calling op until budget ops are done (budget > 0)
// or d has passed, timing each op.
func runLoad(g int, budget int64, d time.Duration, op func(w int) error) (loadResult, error) {
	var remaining atomic.Int64
	remaining.Store(budget)
	deadline := time.Now().Add(d)
	lats := make([][]time.Duration, g)
	errs := make(chan error, g)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			l := make([]time.Duration, 0, 4096)
			for i := 0; ; i++ {
				if budget > 0 {
					if remaining.Add(-1) < 0 {
						break
					}
				} else if i%16 == 0 && time.Now().After(deadline) {
					break
				}
				t0 := time.Now()
				if err := op(w); err != nil {
					errs <- err
					return
				}
				l = append(l, time.Since(t0))
			}
			lats[w] = l
		}(w)
	}
	wg.Wait()
	r := loadResult{elapsed: time.Since(start)}
	select {
	case err := <-errs:
		return r, err
	default:
	}
	for _, l := range lats {
		r.lat = append(r.lat, l...)
	}
	r.ops = int64(len(r.lat))
	slices.Sort(r.lat)
	return r, nil
}

// ---------------------------------------------------------------- ceiling

// probe is the raw group-commit ceiling: one flusher, one WriteAt and one
// fdatasync per batch.
type probe struct {
	f       vfs.File
	off     int64
	mu      sync.Mutex
	pending []byte
	done    chan struct{}
	spare   []byte
	wake    chan struct{}
	stop    chan struct{}
	exited  chan struct{}
	syncs   atomic.Int64
	err     atomic.Pointer[error]
}

// newProbe creates a fallocated, fsynced file of benchSegment bytes in dir
// (as the store creates a segment) and starts the flusher.
func newProbe(tb testing.TB, dir string) *probe {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := vfs.OS.Create(filepath.Join(dir, "ceiling"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.Allocate(0, benchSegment); err != nil {
		tb.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	if err := vfs.OS.SyncDir(dir); err != nil {
		tb.Fatal(err)
	}
	p := &probe{f: f, done: make(chan struct{}), wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{})}
	go p.flusher()
	return p
}

// submit hands rec to the flusher and waits until it is durable.
func (p *probe) submit(rec []byte) error {
	p.mu.Lock()
	p.pending = append(p.pending, rec...)
	ch := p.done
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-ch
	if e := p.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *probe) flusher() {
	defer close(p.exited)
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		}
		p.mu.Lock()
		if len(p.pending) == 0 {
			p.mu.Unlock()
			continue
		}
		buf, ch := p.pending, p.done
		p.pending, p.done = p.spare[:0], make(chan struct{})
		p.mu.Unlock()
		if p.off+int64(len(buf)) > benchSegment {
			p.off = 0
		}
		_, err := p.f.WriteAt(buf, p.off)
		if err == nil {
			err = p.f.Datasync()
		}
		if err != nil {
			p.err.Store(&err)
		}
		p.off += int64(len(buf))
		p.syncs.Add(1)
		close(ch)
		p.spare = buf
	}
}

func (p *probe) close() {
	close(p.stop)
	<-p.exited
	p.f.Close()
}

func runCeiling(tb testing.TB, dir string, g int, budget int64, d time.Duration) loadResult {
	p := newProbe(tb, dir)
	defer os.RemoveAll(dir)
	defer p.close()
	recs := make([][]byte, g)
	for w := range recs {
		b, err := record.Encode(nil, benchMessage(w), record.Limits{MaxMessageSize: core.DefaultMaxMessageSize})
		if err != nil {
			tb.Fatal(err)
		}
		recs[w] = b
	}
	r, err := runLoad(g, budget, d, func(w int) error { return p.submit(recs[w]) })
	if err != nil {
		tb.Fatal(err)
	}
	r.syncs = p.syncs.Load()
	return r
}

// ---------------------------------------------------------------- store

// benchStore opens a store in dir with the options a strategy's policy
// asks for and starts the strategy (nil: no flusher).
func benchStore(tb testing.TB, dir string, strat sdk.FlushStrategy) (*core.Store, func()) {
	o := core.Options{Dir: dir, Logger: quietLogs, CheckpointEvery: time.Second,
		// The bench machine's disk is shared: do not refuse appends or
		// delete segments because of other programs' files.
		Retention: core.RetentionOptions{FileReservedTime: -1, DiskMaxUsedRatio: 0.997, CleanForciblyRatio: 0.998, WarningRatio: 0.999}}
	if strat != nil {
		storehost.ApplyFlushPolicy(&o, strat.AckPolicy())
	}
	s, err := core.Open(o)
	if err != nil {
		tb.Fatal(err)
	}
	if strat != nil {
		if err := strat.Start(bg, storehost.New(s, quietLogs)); err != nil {
			tb.Fatal(err)
		}
	}
	return s, func() {
		if strat != nil {
			strat.Stop(bg)
		}
		if err := s.Close(); err != nil {
			tb.Fatal(err)
		}
	}
}

// runSyncLoad runs g producers of Append + WaitFlushed on a fresh store
// driven by the named strategy.
func runSyncLoad(tb testing.TB, dir, name string, g int, budget int64, d time.Duration) loadResult {
	strat, err := New(name)
	if err != nil {
		tb.Fatal(err)
	}
	s, closeStore := benchStore(tb, dir, strat)
	defer os.RemoveAll(dir)
	defer closeStore()
	msgs := make([]*record.Message, g)
	for w := range msgs {
		msgs[w] = benchMessage(w)
	}
	ctx := context.Background()
	r, err := runLoad(g, budget, d, func(w int) error {
		res, err := s.Append(msgs[w])
		if err != nil {
			return err
		}
		return s.WaitFlushed(ctx, res.End())
	})
	if err != nil {
		tb.Fatal(err)
	}
	if mw, ok := strat.(interface{ flushCount() uint64 }); ok {
		r.syncs = int64(mw.flushCount())
	}
	return r
}

func (b *base) flushCount() uint64 { return b.flushes.Get() }

func report(b *testing.B, r loadResult, recSize int) {
	b.ReportMetric(r.rate(), "recs/s")
	b.ReportMetric(r.rate()*float64(recSize)/1e6, "MB/s")
	b.ReportMetric(float64(r.pct(0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(r.pct(0.99).Microseconds()), "p99-µs")
	if r.syncs > 0 {
		b.ReportMetric(float64(r.ops)/float64(r.syncs), "recs/fsync")
	}
	b.ReportMetric(0, "ns/op")
}

func BenchmarkCeiling(b *testing.B) {
	size := benchRecordSize(b)
	for _, g := range benchGs {
		b.Run(fmt.Sprintf("G=%d", g), func(b *testing.B) {
			report(b, runCeiling(b, b.TempDir(), g, int64(b.N), 0), size)
		})
	}
}

func BenchmarkSync(b *testing.B) {
	size := benchRecordSize(b)
	for _, g := range benchGs {
		b.Run(fmt.Sprintf("G=%d", g), func(b *testing.B) {
			report(b, runSyncLoad(b, b.TempDir(), NameSync, g, int64(b.N), 0), size)
		})
	}
}

func benchEnv(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// pairedMode is one side of the paired comparison: a ceiling probe or a
// store with a strategy, kept open across rounds.
type pairedMode struct {
	name   string
	submit func(w int) error
	syncs  func() int64
	close  func()
	lat    []time.Duration
	rates  []float64
}

// BenchmarkSyncVsCeiling is the paired comparison: for each G it keeps a
// ceiling probe and a sync store open and runs rounds of one short phase
// each (KEEL_BENCH_PHASE, default 400ms;
// KEEL_BENCH_ROUNDS, default 9), rotating their order every round, so that
// drift and other programs' I/O hit both alike. It reports the median
// per-round throughput of each, the median of the per-round ratios
// strategy/ceiling, and p50/p99 ack latency over all rounds. Run it with
// -benchtime=1x.
func BenchmarkSyncVsCeiling(b *testing.B) {
	phase := benchEnv("KEEL_BENCH_PHASE", 400*time.Millisecond)
	rounds := int(benchEnv("KEEL_BENCH_ROUNDS", 9))
	for _, g := range benchGs {
		b.Run(fmt.Sprintf("G=%d", g), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				pairedRun(b, g, phase, rounds)
			}
		})
	}
}

func pairedRun(b *testing.B, g int, phase time.Duration, rounds int) {
	dir := b.TempDir()
	p := newProbe(b, filepath.Join(dir, "ceiling"))
	recs := make([][]byte, g)
	msgs := make([]*record.Message, g)
	for w := range recs {
		msgs[w] = benchMessage(w)
		rec, err := record.Encode(nil, msgs[w], record.Limits{MaxMessageSize: core.DefaultMaxMessageSize})
		if err != nil {
			b.Fatal(err)
		}
		recs[w] = rec
	}
	modes := []*pairedMode{{name: "ceiling", submit: func(w int) error { return p.submit(recs[w]) }, syncs: p.syncs.Load, close: p.close}}
	for _, name := range []string{NameSync} {
		strat, _ := New(name)
		s, closeStore := benchStore(b, filepath.Join(dir, name), strat)
		ctx := context.Background()
		bs := strat.(interface{ flushCount() uint64 })
		modes = append(modes, &pairedMode{name: name,
			submit: func(w int) error {
				res, err := s.Append(msgs[w])
				if err != nil {
					return err
				}
				return s.WaitFlushed(ctx, res.End())
			},
			syncs: func() int64 { return int64(bs.flushCount()) },
			close: closeStore,
		})
	}
	ratios := map[string][]float64{}
	ops := map[string]int64{}
	syncs := map[string]int64{}
	for r := 0; r < rounds; r++ {
		rate := map[string]float64{}
		for k := range modes {
			m := modes[(r+k)%len(modes)]
			s0 := m.syncs()
			res, err := runLoad(g, 0, phase, m.submit)
			if err != nil {
				b.Fatal(err)
			}
			syncs[m.name] += m.syncs() - s0
			ops[m.name] += res.ops
			m.lat = append(m.lat, res.lat...)
			m.rates = append(m.rates, res.rate())
			rate[m.name] = res.rate()
		}
		for _, m := range modes[1:] {
			ratios[m.name] = append(ratios[m.name], rate[m.name]/rate["ceiling"])
		}
	}
	for _, m := range modes {
		m.close()
		slices.Sort(m.lat)
		lr := loadResult{lat: m.lat}
		b.ReportMetric(median(m.rates), m.name+"-recs/s")
		b.ReportMetric(float64(lr.pct(0.5).Microseconds()), m.name+"-p50-µs")
		b.ReportMetric(float64(lr.pct(0.99).Microseconds()), m.name+"-p99-µs")
		if syncs[m.name] > 0 {
			b.ReportMetric(float64(ops[m.name])/float64(syncs[m.name]), m.name+"-recs/fsync")
		}
		if m.name != "ceiling" {
			b.ReportMetric(median(ratios[m.name]), m.name+"/ceiling")
		}
	}
	b.ReportMetric(0, "ns/op")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkAppend: append throughput of g producers with no flusher, with
// the async strategy and with the buffered strategy (defaults).
func BenchmarkAppend(b *testing.B) {
	size := benchRecordSize(b)
	for _, mode := range []string{"none", NameAsync, NameBuffered} {
		for _, g := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/G=%d", mode, g), func(b *testing.B) {
				var strat sdk.FlushStrategy
				if mode != "none" {
					strat, _ = New(mode)
				}
				s, closeStore := benchStore(b, b.TempDir(), strat)
				msgs := make([]*record.Message, g)
				for w := range msgs {
					msgs[w] = benchMessage(w)
				}
				b.ResetTimer()
				r, err := runLoad(g, int64(b.N), 0, func(w int) error { _, err := s.Append(msgs[w]); return err })
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(r.rate(), "recs/s")
				b.ReportMetric(r.rate()*float64(size)/1e6, "MB/s")
				closeStore()
			})
		}
	}
}
