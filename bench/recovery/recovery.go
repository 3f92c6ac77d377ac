// Package recovery measures crash recovery of the core store: it builds a
// store of a given commitlog size, keeps producers appending under a flush
// strategy (acks as the strategy's policy says), crashes it, reopens it and
// reports the time until the store is open (ready) and until every
// recovered record is dispatched to the consume queues, and how many
// acknowledged messages the crash lost.
//
// Two crash kinds:
//
//   - "kill9": the appender is a child process (this executable re-run
//     with ChildEnv set; the program's main must call MaybeChild first),
//     killed with SIGKILL. After every ack it writes the acknowledged queue
//     offset of its queue into a side file (pwrite, no fsync: SIGKILL keeps
//     the page cache, as it keeps the store's unsynced bytes).
//   - "powercut": the appender runs in this process on vfs.CrashFS, which
//     at the cut keeps only synced bytes (and, with torn pages, some
//     unsynced 4 KiB pages); the store is then reopened on the rebooted
//     filesystem.
//
// Acked messages lost = for every queue, how many acknowledged queue
// offsets the recovered queue does not reach.
package recovery

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/keelmq/keel/bench/engine"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// ChildEnv is the environment variable that turns a re-executed process
// into a recovery appender; its value is the JSON Spec.
const ChildEnv = "KEEL_BENCH_RECOVERY_CHILD"

// Crash kinds.
const (
	Kill9    = "kill9"
	PowerCut = "powercut"
)

// Spec describes one recovery measurement.
type Spec struct {
	// Dir is the store directory (kill9: on the real disk, created and
	// removed afterwards; powercut: a path inside the CrashFS).
	Dir string `json:"dir"`
	// Size is the commitlog size to build before the crash phase.
	Size int64 `json:"size"`
	// Crash is Kill9 or PowerCut.
	Crash string `json:"crash"`
	// Flush is the flush strategy of the appender ("sync" or "async").
	Flush       string `json:"flush"`
	Producers   int    `json:"producers"`
	BodyBytes   int    `json:"body_bytes"`
	SegmentSize int64  `json:"segment_size"`
	// CrashAfter is how long producers append under the strategy before
	// the crash. Default 300ms.
	CrashAfter time.Duration `json:"crash_after"`
	// Seed drives CrashFS's torn pages.
	Seed int64 `json:"seed"`
	// Command re-executes this program for kill9; default os.Args. The
	// child must reach MaybeChild.
	Command []string `json:"-"`
}

// Result is one measurement.
type Result struct {
	// StoreBytes is the commitlog size when the crash came (the appender's
	// committed offset; for kill9 the recovered end, which is the same
	// up to the unacknowledged tail).
	StoreBytes int64 `json:"store_bytes"`
	// ReadyMs is the time core.Open took.
	ReadyMs float64 `json:"ready_ms"`
	// DispatchedMs is the time from the start of core.Open until every
	// recovered record was dispatched.
	DispatchedMs float64 `json:"dispatched_ms"`
	// Acked is the number of acknowledged messages, AckedLost how many of
	// them the recovered store lacks.
	Acked     int64 `json:"acked"`
	AckedLost int64 `json:"acked_lost"`
	// Recovery info from the reopened store.
	Crashed   bool  `json:"crashed"`
	ScanBytes int64 `json:"scan_bytes"` // bytes validated: End - ScanFrom
	Truncated int64 `json:"truncated_bytes"`
	// PhasesMs is where core.Open's time went (core.RecoveryInfo.Phases).
	PhasesMs map[string]float64 `json:"phases_ms,omitempty"`
}

func (s *Spec) fill() error {
	if s.Producers <= 0 {
		s.Producers = 4
	}
	if s.BodyBytes <= 0 {
		s.BodyBytes = 128
	}
	if s.SegmentSize <= 0 {
		s.SegmentSize = 64 << 20
	}
	if s.CrashAfter <= 0 {
		s.CrashAfter = 300 * time.Millisecond
	}
	if s.Dir == "" {
		return errors.New("recovery: Spec.Dir is required")
	}
	if s.Crash != Kill9 && s.Crash != PowerCut {
		return fmt.Errorf("recovery: unknown crash kind %q", s.Crash)
	}
	if names := matrix.DefaultCatalog().Names(sdk.KindFlush); !slices.Contains(names, s.Flush) {
		return fmt.Errorf("recovery: unknown flush strategy %q: want one of %q", s.Flush, names)
	}
	return nil
}

// Run performs one measurement.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	if err := spec.fill(); err != nil {
		return nil, err
	}
	switch spec.Crash {
	case Kill9:
		return runKill9(ctx, spec)
	default:
		return runPowerCut(ctx, spec)
	}
}

func storeOptions(spec Spec, fsys vfs.FS) core.Options {
	return core.Options{Dir: spec.Dir, FS: fsys, SegmentSize: spec.SegmentSize, Retention: engine.Retention,
		MaxMessageSize: engine.MaxMessageSize(spec.SegmentSize), Logger: slog.New(slog.DiscardHandler)}
}

// appender builds a store and keeps appending under a flush strategy.
type appender struct {
	spec   Spec
	store  *core.Store
	runner engine.Runner
	mu     sync.Mutex
	acked  []int64 // per queue: highest acknowledged queue offset, -1 none
	frozen bool    // set at the crash: later acks do not count
	onAck  func(q int, off int64)
	stop   chan struct{}
	wg     sync.WaitGroup
}

func openAppender(ctx context.Context, spec Spec, fsys vfs.FS) (*appender, error) {
	runner, err := (&engine.Loader{}).Flush(ctx, matrix.Builtin(sdk.KindFlush, spec.Flush, matrix.ModeBuiltin))
	if err != nil {
		return nil, err
	}
	opts := storeOptions(spec, fsys)
	opts.VisibleAfterFlush = runner.Policy().VisibleAfterFlush
	st, err := core.Open(opts)
	if err != nil {
		runner.Stop(context.Background()) // releases it (Runner's contract)
		return nil, fmt.Errorf("open appender store: %w", err)
	}
	a := &appender{spec: spec, store: st, runner: runner, acked: make([]int64, spec.Producers), stop: make(chan struct{})}
	for i := range a.acked {
		a.acked[i] = -1
	}
	return a, nil
}

func message(q, bodyBytes int) *record.Message {
	body := make([]byte, bodyBytes)
	for i := range body {
		body[i] = byte(i + q)
	}
	return &record.Message{Topic: engine.DefaultTopic, QueueID: int32(q), Body: body,
		Properties: []byte("KEYS\x01k\x02"), BornTimestamp: time.Now().UnixMilli()}
}

// fill appends batches until the log holds spec.Size bytes, then flushes:
// everything filled counts as acknowledged.
func (a *appender) fill() error {
	var wg sync.WaitGroup
	errs := make([]error, a.spec.Producers)
	for q := 0; q < a.spec.Producers; q++ {
		wg.Add(1)
		go func(q int) {
			defer wg.Done()
			m := message(q, a.spec.BodyBytes)
			batch := make([]*record.Message, 64)
			for i := range batch {
				batch[i] = m
			}
			var res []core.AppendResult
			for a.store.Positions().Committed < a.spec.Size {
				var err error
				res, err = a.store.AppendBatch(batch, res[:0])
				if err != nil {
					errs[q] = fmt.Errorf("fill: %w", err)
					return
				}
				a.acked[q] = res[len(res)-1].QueueOffset
			}
		}(q)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if _, err := a.store.Flush(); err != nil {
		return fmt.Errorf("fill: flush: %w", err)
	}
	return nil
}

// produce starts the producers of the crash phase, under the strategy.
func (a *appender) produce(ctx context.Context) error {
	if err := a.runner.Start(ctx, storehost.New(a.store, slog.New(slog.DiscardHandler))); err != nil {
		return err
	}
	pol := a.runner.Policy()
	for q := 0; q < a.spec.Producers; q++ {
		a.wg.Add(1)
		go func(q int) {
			defer a.wg.Done()
			m := message(q, a.spec.BodyBytes)
			for {
				select {
				case <-a.stop:
					return
				default:
				}
				r, err := a.store.Append(m)
				if err != nil {
					return
				}
				if pol.WaitFlush {
					if err := a.store.WaitFlushed(ctx, r.End()); err != nil {
						return
					}
				}
				a.mu.Lock()
				if !a.frozen {
					a.acked[q] = r.QueueOffset
					if a.onAck != nil {
						a.onAck(q, r.QueueOffset)
					}
				}
				a.mu.Unlock()
			}
		}(q)
	}
	return nil
}

// freeze stops counting acks (the crash happens now) and returns them.
func (a *appender) freeze() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.frozen = true
	return append([]int64(nil), a.acked...)
}

func (a *appender) abandon() {
	close(a.stop)
	a.runner.Stop(context.Background())
	a.store.Close() // fails on the detached files; nothing reaches the disk
	a.wg.Wait()
}

// measure reopens the store and counts lost acks.
func measure(spec Spec, fsys vfs.FS, acked []int64) (*Result, error) {
	t0 := time.Now()
	st, err := core.Open(storeOptions(spec, fsys))
	if err != nil {
		return nil, fmt.Errorf("reopen after %s: %w", spec.Crash, err)
	}
	ready := time.Since(t0)
	end := st.Positions().Committed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for st.Positions().Dispatched < end {
		if _, err := st.WaitDispatched(ctx, st.Positions().Dispatched); err != nil {
			st.Close()
			return nil, fmt.Errorf("wait for dispatch after %s: %w", spec.Crash, err)
		}
	}
	dispatched := time.Since(t0)
	ri := st.Recovery()
	res := &Result{StoreBytes: end, ReadyMs: ms(ready), DispatchedMs: ms(dispatched), Crashed: ri.Crashed,
		ScanBytes: ri.End - ri.ScanFrom, Truncated: ri.Truncated, PhasesMs: map[string]float64{}}
	for _, p := range ri.Phases {
		res.PhasesMs[p.Name] += ms(p.Took)
	}
	for q, a := range acked {
		if a < 0 {
			continue
		}
		res.Acked += a + 1
		if have := st.MaxQueueOffset(engine.DefaultTopic, int32(q)); have < a+1 {
			res.AckedLost += a + 1 - have
		}
	}
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("close recovered store: %w", err)
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runPowerCut(ctx context.Context, spec Spec) (*Result, error) {
	cfs := vfs.NewCrashFS(spec.Seed)
	g := &gatedFS{fs: cfs}
	a, err := openAppender(ctx, spec, g)
	if err != nil {
		return nil, err
	}
	if err := a.fill(); err != nil {
		a.store.Close()
		return nil, err
	}
	if err := a.produce(ctx); err != nil {
		a.store.Close()
		return nil, err
	}
	select {
	case <-time.After(spec.CrashAfter):
	case <-ctx.Done():
	}
	committed := a.store.Positions().Committed
	acked := a.freeze()
	g.cut(vfs.CrashOptions{TornPages: true})
	a.abandon()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := measure(spec, cfs, acked)
	if err != nil {
		return nil, err
	}
	res.StoreBytes = committed
	return res, nil
}

// ackFile is the side file the kill9 child writes acked queue offsets to.
const ackFile = "acked"

func runKill9(ctx context.Context, spec Spec) (*Result, error) {
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create recovery dir: %w", err)
	}
	defer os.RemoveAll(spec.Dir)
	side := spec.Dir + ".acked"
	defer os.Remove(side)
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	argv := spec.Command
	if len(argv) == 0 {
		argv = os.Args
	}
	exe, err := os.Executable()
	if err != nil {
		exe = argv[0]
	}
	cmd := exec.CommandContext(ctx, exe, argv[1:]...)
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(js))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start recovery appender: %w", err)
	}
	lines := bufio.NewScanner(out)
	ready := false
	for lines.Scan() {
		if lines.Text() == "producing" {
			ready = true
			break
		}
	}
	if !ready {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("recovery appender did not start: %s", strings.TrimSpace(stderr.String()))
	}
	go io.Copy(io.Discard, out)
	select {
	case <-time.After(spec.CrashAfter):
	case <-ctx.Done():
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("kill -9 the appender: %w", err)
	}
	cmd.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(side)
	if err != nil {
		return nil, fmt.Errorf("read acked offsets: %w", err)
	}
	acked := make([]int64, spec.Producers)
	for q := range acked {
		acked[q] = -1
		if len(b) >= 8*(q+1) {
			acked[q] = int64(binary.BigEndian.Uint64(b[8*q:])) - 1
		}
	}
	return measure(spec, vfs.OS, acked)
}

// MaybeChild runs the kill9 appender and exits if this process was started
// as one (ChildEnv is set); otherwise it returns at once. Call it first
// thing in main (and in TestMain of tests that run kill9 measurements).
func MaybeChild() {
	js := os.Getenv(ChildEnv)
	if js == "" {
		return
	}
	if err := child(js); err != nil {
		fmt.Fprintln(os.Stderr, "recovery appender:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func child(js string) error {
	var spec Spec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	if err := spec.fill(); err != nil {
		return err
	}
	side, err := os.OpenFile(spec.Dir+".acked", os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	ctx := context.Background()
	a, err := openAppender(ctx, spec, vfs.OS)
	if err != nil {
		return err
	}
	if err := a.fill(); err != nil {
		return err
	}
	var buf [8]byte
	write := func(q int, off int64) error {
		// stored as offset+1 so that zero means "nothing acked"
		binary.BigEndian.PutUint64(buf[:], uint64(off+1))
		_, err := side.WriteAt(buf[:], int64(8*q))
		return err
	}
	for q, off := range a.acked {
		if err := write(q, off); err != nil {
			return err
		}
	}
	a.onAck = func(q int, off int64) { write(q, off) }
	if err := a.produce(ctx); err != nil {
		return err
	}
	fmt.Println("producing")
	// The parent kills us; do not outlive a lost parent.
	time.Sleep(2 * time.Minute)
	return errors.New("not killed within 2 minutes")
}
