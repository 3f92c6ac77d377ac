// Package ceiling measures the physical limits of the disk a keel store
// runs on, in the store's own file regime, so that every benchmark cell can
// be reported as a fraction of what the hardware allows:
//
//   - sequential write bandwidth, through a shared mmap (as the store
//     writes) and through pwrite, with small (4 KiB) and large (1 MiB)
//     writes, timed up to and including the final fdatasync;
//   - the serial fdatasync rate: one goroutine writing one record and
//     calling fdatasync in a loop;
//   - the concurrent group-commit ceiling: N producer goroutines each queue
//     one record and block until it is durable, while one flusher goroutine
//     writes whatever is queued with one write and one fdatasync and
//     releases the whole batch (the shape of RocketMQ's GroupCommitService).
//
// The serial and group-commit probes run both through mmap and through
// pwrite; the ceiling is the better of the two.
//
// Every probe writes fresh segment files laid out like the store's
// commitlog (fixed-size files named by their 20-digit start offset,
// preallocated with fallocate through vfs.FS.Allocate and synced before
// use), rolls to a new one when a file fills, runs for a fixed duration,
// and is repeated; results are the median with the min–max range. Files are
// removed after each run.
package ceiling

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/core/vfs"
)

// Stat summarises repeated measurements of one quantity.
type Stat struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Runs   []float64 `json:"runs"`
}

// NewStat summarises runs (in the order measured). An empty slice gives
// the zero Stat.
func NewStat(runs []float64) Stat {
	if len(runs) == 0 {
		return Stat{}
	}
	s := slices.Clone(runs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: med, Min: s[0], Max: s[len(s)-1], Runs: slices.Clone(runs)}
}

// Method is how bytes reach the file.
type Method string

// Write methods.
const (
	// MethodMmap copies into a MAP_SHARED mapping of the file, as
	// core.Store does for appends.
	MethodMmap Method = "mmap"
	// MethodPwrite calls pwrite(2) (vfs.File.WriteAt).
	MethodPwrite Method = "pwrite"
)

// Options configures Run. Zero fields take the defaults in brackets.
type Options struct {
	// Dir is a scratch directory on the disk to measure; it is created if
	// needed and the probe files are removed afterwards. Required.
	Dir string
	// FS is the filesystem [vfs.OS].
	FS vfs.FS
	// FileSize is the size of each preallocated segment file [256 MiB].
	FileSize int64
	// Duration is the length of one run of one probe [1s].
	Duration time.Duration
	// Repeats is the number of runs per probe [3].
	Repeats int
	// SmallWrite and LargeWrite are the two sequential write sizes
	// [4096, 1 MiB].
	SmallWrite, LargeWrite int
	// RecordBytes is the record size of the fdatasync and group-commit
	// probes: the stored size of a benchmark message, header included
	// [128].
	RecordBytes []int
	// Producers are the producer counts of the group-commit probe [1, 64].
	Producers []int
	// Progress, if set, is called before each run with a short description.
	Progress func(msg string)
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("ceiling: Options.Dir is required")
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.FileSize == 0 {
		o.FileSize = 256 << 20
	}
	if o.Duration == 0 {
		o.Duration = time.Second
	}
	if o.Repeats == 0 {
		o.Repeats = 3
	}
	if o.SmallWrite == 0 {
		o.SmallWrite = 4096
	}
	if o.LargeWrite == 0 {
		o.LargeWrite = 1 << 20
	}
	if len(o.RecordBytes) == 0 {
		o.RecordBytes = []int{128}
	}
	if len(o.Producers) == 0 {
		o.Producers = []int{1, 64}
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	if int64(o.LargeWrite) > o.FileSize || int64(o.SmallWrite) > o.FileSize {
		return o, fmt.Errorf("ceiling: write sizes %d/%d exceed the file size %d", o.SmallWrite, o.LargeWrite, o.FileSize)
	}
	for _, r := range o.RecordBytes {
		if r <= 0 || int64(r) > o.FileSize {
			return o, fmt.Errorf("ceiling: record size %d outside (0, file size %d]", r, o.FileSize)
		}
	}
	for _, p := range o.Producers {
		if p <= 0 {
			return o, fmt.Errorf("ceiling: producer count %d must be positive", p)
		}
	}
	return o, nil
}

// SeqWrite is one sequential-bandwidth probe.
type SeqWrite struct {
	Method     Method `json:"method"`
	WriteBytes int    `json:"write_bytes"`
	// MBPerSec is bytes written / (time to write them + the final
	// fdatasync), in 10^6 bytes per second.
	MBPerSec Stat `json:"mb_per_sec"`
}

// Serial is the serial fdatasync probe at one record size and method.
type Serial struct {
	Method      Method  `json:"method"`
	RecordBytes int     `json:"record_bytes"`
	PerSec      Stat    `json:"per_sec"`
	P50us       float64 `json:"p50_us"` // median over runs of the per-run p50
	P99us       float64 `json:"p99_us"`
}

// GroupCommit is the concurrent group-commit probe at one producer count,
// record size and method.
type GroupCommit struct {
	Method      Method  `json:"method"`
	Producers   int     `json:"producers"`
	RecordBytes int     `json:"record_bytes"`
	PerSec      Stat    `json:"per_sec"`       // records made durable per second
	SyncsPerSec float64 `json:"syncs_per_sec"` // median over runs
	AvgBatch    float64 `json:"avg_batch"`     // median over runs of records per fdatasync
	P50us       float64 `json:"p50_us"`        // median over runs of the per-run p50 wait
	P99us       float64 `json:"p99_us"`
}

// Result is everything Run measured.
type Result struct {
	FileSize   int64         `json:"file_size"`
	DurationMs int64         `json:"duration_ms"`
	Repeats    int           `json:"repeats"`
	SeqWrite   []SeqWrite    `json:"seq_write"`
	Serial     []Serial      `json:"serial_fdatasync"`
	Group      []GroupCommit `json:"group_commit"`
}

// SeqMBPerSec returns the median bandwidth of the probe with method m and
// write size n, or 0 if it was not measured.
func (r *Result) SeqMBPerSec(m Method, n int) float64 {
	for _, s := range r.SeqWrite {
		if s.Method == m && s.WriteBytes == n {
			return s.MBPerSec.Median
		}
	}
	return 0
}

// BestSeqMBPerSec is the highest median sequential bandwidth of any method
// and write size: the bandwidth ceiling.
func (r *Result) BestSeqMBPerSec() float64 {
	best := 0.0
	for _, s := range r.SeqWrite {
		best = max(best, s.MBPerSec.Median)
	}
	return best
}

// GroupPerSec returns the group-commit ceiling for producers at the record
// size closest to recordBytes: the higher median of the two methods, or 0
// if none was measured for that producer count.
func (r *Result) GroupPerSec(producers, recordBytes int) float64 {
	g, _ := r.bestGroup(producers, recordBytes)
	return g.PerSec.Median
}

// GroupMethod is the method of the higher group-commit median for
// producers at the record size closest to recordBytes (what GroupPerSec
// reports); MethodMmap, the store's, when none was measured or r is nil.
func (r *Result) GroupMethod(producers, recordBytes int) Method {
	if r == nil {
		return MethodMmap
	}
	if g, ok := r.bestGroup(producers, recordBytes); ok {
		return g.Method
	}
	return MethodMmap
}

// bestGroup is the group-commit probe for producers at the record size
// closest to recordBytes with the higher median of the two methods.
func (r *Result) bestGroup(producers, recordBytes int) (GroupCommit, bool) {
	var best GroupCommit
	bestDiff := -1
	for _, g := range r.Group {
		if g.Producers != producers {
			continue
		}
		d := abs(g.RecordBytes - recordBytes)
		if bestDiff < 0 || d < bestDiff || (d == bestDiff && g.PerSec.Median > best.PerSec.Median) {
			best, bestDiff = g, d
		}
	}
	return best, bestDiff >= 0
}

// SerialPerSec returns the serial fdatasync rate at the record size
// closest to recordBytes: the higher median of the two methods (0 if not
// measured).
func (r *Result) SerialPerSec(recordBytes int) float64 {
	best, bestDiff := 0.0, -1
	for _, s := range r.Serial {
		d := abs(s.RecordBytes - recordBytes)
		switch {
		case bestDiff < 0 || d < bestDiff:
			best, bestDiff = s.PerSec.Median, d
		case d == bestDiff:
			best = max(best, s.PerSec.Median)
		}
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// Run measures every probe o asks for. It stops early with ctx's error.
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := o.FS.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("ceiling: create %s: %w", o.Dir, err)
	}
	res := &Result{FileSize: o.FileSize, DurationMs: o.Duration.Milliseconds(), Repeats: o.Repeats}
	for _, m := range []Method{MethodMmap, MethodPwrite} {
		for _, n := range []int{o.SmallWrite, o.LargeWrite} {
			var runs []float64
			for i := 0; i < o.Repeats; i++ {
				o.Progress(fmt.Sprintf("ceiling: sequential %s %s writes, run %d/%d", m, sizeName(n), i+1, o.Repeats))
				v, err := SeqWriteRun(ctx, o, m, n)
				if err != nil {
					return nil, err
				}
				runs = append(runs, v)
			}
			res.SeqWrite = append(res.SeqWrite, SeqWrite{Method: m, WriteBytes: n, MBPerSec: NewStat(runs)})
		}
	}
	for _, m := range []Method{MethodMmap, MethodPwrite} {
		for _, rb := range o.RecordBytes {
			var runs, p50, p99 []float64
			for i := 0; i < o.Repeats; i++ {
				o.Progress(fmt.Sprintf("ceiling: serial %s %d B + fdatasync, run %d/%d", m, rb, i+1, o.Repeats))
				r, err := SerialRun(ctx, o, m, rb)
				if err != nil {
					return nil, err
				}
				runs = append(runs, r.PerSec)
				p50 = append(p50, r.P50us)
				p99 = append(p99, r.P99us)
			}
			res.Serial = append(res.Serial, Serial{Method: m, RecordBytes: rb, PerSec: NewStat(runs), P50us: NewStat(p50).Median, P99us: NewStat(p99).Median})
		}
	}
	for _, m := range []Method{MethodMmap, MethodPwrite} {
		for _, rb := range o.RecordBytes {
			for _, p := range o.Producers {
				var runs, syncs, batch, p50, p99 []float64
				for i := 0; i < o.Repeats; i++ {
					o.Progress(fmt.Sprintf("ceiling: group commit %s, %d producers × %d B, run %d/%d", m, p, rb, i+1, o.Repeats))
					r, err := GroupCommitRun(ctx, o, m, p, rb)
					if err != nil {
						return nil, err
					}
					runs = append(runs, r.PerSec)
					syncs = append(syncs, r.SyncsPerSec)
					batch = append(batch, r.AvgBatch)
					p50 = append(p50, r.P50us)
					p99 = append(p99, r.P99us)
				}
				res.Group = append(res.Group, GroupCommit{Method: m, Producers: p, RecordBytes: rb, PerSec: NewStat(runs),
					SyncsPerSec: NewStat(syncs).Median, AvgBatch: NewStat(batch).Median, P50us: NewStat(p50).Median, P99us: NewStat(p99).Median})
			}
		}
	}
	return res, nil
}

func sizeName(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// randomBytes returns n non-repeating pseudo-random bytes (a host may
// special-case zero pages, so probes never write zeros).
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

var probeSeq atomic.Int64

// segments writes a sequence of preallocated segment files in dir, like
// the store's commitlog.
type segments struct {
	fs     vfs.FS
	dir    string
	size   int64
	mmap   bool
	next   int64 // start offset of the next segment
	f      vfs.File
	m      vfs.Mapping
	data   []byte
	off    int64 // write position inside the current file
	syncs  int64
	writes int64
}

func newSegments(fsys vfs.FS, parent string, size int64, mmap bool) (*segments, error) {
	dir := filepath.Join(parent, fmt.Sprintf("ceiling-%d-%d", os.Getpid(), probeSeq.Add(1)))
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create probe dir %s: %w", dir, err)
	}
	s := &segments{fs: fsys, dir: dir, size: size, mmap: mmap}
	if err := s.roll(); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// roll makes the current segment durable, closes it and opens the next
// one, preallocated with fallocate and synced, as core.createSegment does.
func (s *segments) roll() error {
	if s.f != nil {
		if err := s.sync(); err != nil {
			return err
		}
		if err := s.closeCurrent(); err != nil {
			return err
		}
	}
	name := filepath.Join(s.dir, fmt.Sprintf("%020d", s.next))
	f, err := s.fs.Create(name)
	if err != nil {
		return fmt.Errorf("create probe segment %s: %w", name, err)
	}
	if err := f.Allocate(0, s.size); err != nil {
		f.Close()
		return fmt.Errorf("preallocate probe segment %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync new probe segment %s: %w", name, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		f.Close()
		return fmt.Errorf("sync probe dir %s: %w", s.dir, err)
	}
	s.f, s.off = f, 0
	s.next += s.size
	if s.mmap {
		m, err := f.Map(int(s.size))
		if err != nil {
			return fmt.Errorf("map probe segment %s: %w", name, err)
		}
		s.m, s.data = m, m.Bytes()
	}
	return nil
}

// write appends p (len(p) <= size) to the current segment, rolling first
// when it does not fit.
func (s *segments) write(p []byte) error {
	if s.off+int64(len(p)) > s.size {
		if err := s.roll(); err != nil {
			return err
		}
	}
	if s.mmap {
		copy(s.data[s.off:], p)
	} else if _, err := s.f.WriteAt(p, s.off); err != nil {
		return fmt.Errorf("pwrite probe segment at %d: %w", s.off, err)
	}
	s.off += int64(len(p))
	s.writes++
	return nil
}

// sync is fdatasync of the current segment.
func (s *segments) sync() error {
	s.syncs++
	if err := s.f.Datasync(); err != nil {
		return fmt.Errorf("fdatasync probe segment: %w", err)
	}
	return nil
}

func (s *segments) closeCurrent() error {
	var errs []error
	if s.m != nil {
		errs = append(errs, s.m.Close())
		s.m, s.data = nil, nil
	}
	if s.f != nil {
		errs = append(errs, s.f.Close())
		s.f = nil
	}
	return errors.Join(errs...)
}

// remove closes everything and deletes the probe's files.
func (s *segments) remove() error {
	err := s.closeCurrent()
	return errors.Join(err, s.fs.RemoveAll(s.dir))
}

// SeqWriteRun is one run of the sequential bandwidth probe: writes of
// writeSize bytes by method m for o.Duration, then fdatasync; it returns
// MB/s (10^6 bytes per second) including the final sync.
func SeqWriteRun(ctx context.Context, o Options, m Method, writeSize int) (float64, error) {
	o, err := o.withDefaults()
	if err != nil {
		return 0, err
	}
	segs, err := newSegments(o.FS, o.Dir, o.FileSize, m == MethodMmap)
	if err != nil {
		return 0, err
	}
	defer segs.remove()
	src := randomBytes(8<<20+writeSize, uint64(writeSize))
	start := time.Now()
	deadline := start.Add(o.Duration)
	var written int64
	for i := 0; ; i++ {
		if i%64 == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
			break
		}
		at := (written / int64(writeSize) * 4099) % (8 << 20) // vary the source offset
		if err := segs.write(src[at : at+int64(writeSize)]); err != nil {
			return 0, err
		}
		written += int64(writeSize)
	}
	if err := segs.sync(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(written) / time.Since(start).Seconds() / 1e6, nil
}

// SerialResult is one run of the serial fdatasync probe.
type SerialResult struct {
	PerSec       float64
	P50us, P99us float64
}

// SerialRun is one run of the serial probe: one record of recordBytes
// written by method m, then fdatasync, in a loop from one goroutine for
// o.Duration.
func SerialRun(ctx context.Context, o Options, m Method, recordBytes int) (SerialResult, error) {
	o, err := o.withDefaults()
	if err != nil {
		return SerialResult{}, err
	}
	segs, err := newSegments(o.FS, o.Dir, o.FileSize, m == MethodMmap)
	if err != nil {
		return SerialResult{}, err
	}
	defer segs.remove()
	rec := randomBytes(recordBytes, 1)
	var h hist.Histogram
	start := time.Now()
	deadline := start.Add(o.Duration)
	n := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		t0 := time.Now()
		rec[0]++
		if err := segs.write(rec); err != nil {
			return SerialResult{}, err
		}
		if err := segs.sync(); err != nil {
			return SerialResult{}, err
		}
		h.Record(int64(time.Since(t0)))
		n++
	}
	if err := ctx.Err(); err != nil {
		return SerialResult{}, err
	}
	el := time.Since(start).Seconds()
	return SerialResult{PerSec: float64(n) / el, P50us: float64(h.Quantile(0.5)) / 1e3, P99us: float64(h.Quantile(0.99)) / 1e3}, nil
}

// GroupResult is one run of the group-commit probe.
type GroupResult struct {
	PerSec       float64 // records made durable per second
	SyncsPerSec  float64
	AvgBatch     float64 // records per fdatasync
	P50us, P99us float64 // producer wait from enqueue to release
	Records      int64
}

// batch is the records queued for one fdatasync.
type batch struct {
	buf  []byte
	n    int
	done chan struct{}
	err  error
}

// GroupCommitRun is one run of the group-commit probe: producers
// goroutines each queue a recordBytes record and wait until the flusher has
// written it (by method m) and fdatasync'ed it, for o.Duration.
func GroupCommitRun(ctx context.Context, o Options, m Method, producers, recordBytes int) (GroupResult, error) {
	o, err := o.withDefaults()
	if err != nil {
		return GroupResult{}, err
	}
	segs, err := newSegments(o.FS, o.Dir, o.FileSize, m == MethodMmap)
	if err != nil {
		return GroupResult{}, err
	}
	defer segs.remove()
	if int64(producers*recordBytes) > o.FileSize {
		return GroupResult{}, fmt.Errorf("ceiling: %d producers × %d B do not fit a %d-byte file", producers, recordBytes, o.FileSize)
	}

	var mu sync.Mutex
	cur := &batch{done: make(chan struct{})}
	kick := make(chan struct{}, 1)
	stop := make(chan struct{})
	var batches, records int64
	var flushErr error
	flusherDone := make(chan struct{})
	go func() {
		defer close(flusherDone)
		spare := make([]byte, 0, 64<<10)
		for {
			select {
			case <-kick:
			case <-stop:
				mu.Lock()
				b := cur
				mu.Unlock()
				if b.n == 0 {
					return
				}
			}
			mu.Lock()
			b := cur
			cur = &batch{buf: spare[:0], done: make(chan struct{})}
			mu.Unlock()
			if b.n == 0 {
				continue
			}
			err := segs.write(b.buf)
			if err == nil {
				err = segs.sync()
			}
			b.err = err
			batches++
			records += int64(b.n)
			spare = b.buf
			close(b.done)
			if err != nil {
				flushErr = err
				return
			}
		}
	}()

	hs := make([]hist.Histogram, producers)
	start := time.Now()
	deadline := start.Add(o.Duration)
	var wg sync.WaitGroup
	var lastMu sync.Mutex
	last := start
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			rec := randomBytes(recordBytes, uint64(p+2))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				rec[0]++
				mu.Lock()
				b := cur
				b.buf = append(b.buf, rec...)
				b.n++
				first := b.n == 1
				mu.Unlock()
				if first {
					select {
					case kick <- struct{}{}:
					default:
					}
				}
				<-b.done
				if b.err != nil {
					return
				}
				now := time.Now()
				hs[p].Record(int64(now.Sub(t0)))
				lastMu.Lock()
				if now.After(last) {
					last = now
				}
				lastMu.Unlock()
			}
		}(p)
	}
	wg.Wait()
	close(stop)
	<-flusherDone
	if flushErr != nil {
		return GroupResult{}, flushErr
	}
	if err := ctx.Err(); err != nil {
		return GroupResult{}, err
	}
	var all hist.Histogram
	for i := range hs {
		all.Merge(&hs[i])
	}
	el := last.Sub(start).Seconds()
	if el <= 0 {
		el = time.Since(start).Seconds()
	}
	r := GroupResult{Records: records, PerSec: float64(records) / el, SyncsPerSec: float64(batches) / el,
		P50us: float64(all.Quantile(0.5)) / 1e3, P99us: float64(all.Quantile(0.99)) / 1e3}
	if batches > 0 {
		r.AvgBatch = float64(records) / float64(batches)
	}
	return r, nil
}
