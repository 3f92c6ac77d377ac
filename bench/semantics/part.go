package semantics

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/keelmq/keel/bench/ceiling"
	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/bench/report"
	"github.com/keelmq/keel/bench/wire"
)

// PartOptions are what RunPart needs from the surrounding `keel bench`
// run (as wire.PartOptions).
type PartOptions struct {
	// Scratch holds the nodes' stores (one subdirectory per run, removed
	// afterwards).
	Scratch string
	// Queues is the topic's queue count. Default wire.DefaultQueues.
	Queues int
	// SegmentSize overrides the profile's store.segment_size when > 0.
	SegmentSize int64
	// ProfileDirs are searched first for the profile (wire.FindProfile).
	ProfileDirs []string
	// Step is called before each step (SemanticsRuns of them), Result
	// after a successful one, Skip with the steps left out after a
	// failure. Each may be nil.
	Step   func(msg string)
	Result func(msg string)
	Skip   func(n int)
}

// RunPart runs the semantics part of a matrix: per repeat, the timer
// entry (a timer run and a plain run of the same count on fresh nodes,
// the order alternating) and the transaction entry (a transactional run
// and a plain run of the same client), each when configured. It returns
// nil when the part is disabled. An entry whose run fails is reported
// with status "error" and is not run again. It returns early, with what it
// has, when ctx ends.
func RunPart(ctx context.Context, c matrix.SemanticsConfig, o PartOptions) *report.Semantics {
	if !c.Enabled() {
		return nil
	}
	if o.Queues <= 0 {
		o.Queues = wire.DefaultQueues
	}
	out := &report.Semantics{Profile: c.Profile, Producers: c.Producers, Connections: min(c.Connections, c.Producers), Depth: c.Depth, BodyBytes: c.BodyBytes}
	path, perr := wire.FindProfile(c.Profile, o.ProfileDirs...)
	r := &runner{c: c, o: o, path: path}
	if c.Timers > 0 {
		out.Timers = &report.TimerBench{Requested: c.Timers, WindowMs: c.TimerWindow.D().Milliseconds()}
	}
	if c.TxDuration > 0 {
		out.Transactions = &report.TxBench{DurationMs: c.TxDuration.D().Milliseconds()}
	}
	var timers timerAcc
	var txs txAcc
	for rep := range c.Repeats {
		if t := out.Timers; t != nil {
			r.round(&t.Status, &t.Note, perr, fmt.Sprintf("semantics timers %d over %v run %d/%d", c.Timers, c.TimerWindow.D(), rep+1, c.Repeats),
				func() error { return r.timerRound(ctx, rep, &timers) })
		}
		if x := out.Transactions; x != nil {
			r.round(&x.Status, &x.Note, perr, fmt.Sprintf("semantics transactions %v run %d/%d", c.TxDuration.D(), rep+1, c.Repeats),
				func() error { return r.txRound(ctx, rep, &txs) })
		}
		if ctx.Err() != nil {
			return out
		}
	}
	if out.Timers != nil && out.Timers.Status == "" {
		timers.finish(out.Timers)
	}
	if out.Transactions != nil && out.Transactions.Status == "" {
		txs.finish(out.Transactions)
	}
	return out
}

// runner runs the part's rounds.
type runner struct {
	c    matrix.SemanticsConfig
	o    PartOptions
	path string
	n    int // runs so far, for directory names
}

// round runs one round of an entry whose status and note are *status
// and *note: skipped once the entry failed (or its profile was not
// found, perr), otherwise announced with msg and run; a failure marks the
// entry "error".
func (r *runner) round(status, note *string, perr error, msg string, run func() error) {
	switch {
	case *status != "":
		r.skip()
	case perr != nil:
		*status, *note = "error", perr.Error()
		r.skip()
	default:
		r.step(msg)
		if err := run(); err != nil {
			*status, *note = "error", err.Error()
		}
	}
}

func (r *runner) step(msg string) {
	if r.o.Step != nil {
		r.o.Step(msg)
	}
}

func (r *runner) skip() {
	if r.o.Skip != nil {
		r.o.Skip(1)
	}
}

func (r *runner) result(msg string) {
	if r.o.Result != nil {
		r.o.Result(msg)
	}
}

// node is a fresh node spec in its own scratch directory.
func (r *runner) node() wire.NodeSpec {
	r.n++
	return wire.NodeSpec{Profile: r.path, Dir: filepath.Join(r.o.Scratch, fmt.Sprintf("semantics-%d", r.n)), SegmentSize: r.o.SegmentSize,
		Queues: r.o.Queues}
}

func (r *runner) load() wire.LoadSpec {
	return wire.LoadSpec{Queues: r.o.Queues, Producers: r.c.Producers, Conns: r.c.Connections, Depth: r.c.Depth, BodyBytes: r.c.BodyBytes}
}

// timerRound runs one timer run and one plain run of the same count,
// plain first on even rounds.
func (r *runner) timerRound(ctx context.Context, rep int, acc *timerAcc) error {
	var tr *TimerResult
	var plain *wire.Result
	timerRun := func() error {
		runtime.GC()
		var err error
		tr, err = RunTimers(ctx, TimerSpec{Node: r.node(), Load: r.load(), Count: r.c.Timers, Window: r.c.TimerWindow.D()})
		return err
	}
	plainRun := func() error {
		runtime.GC()
		ls := r.load()
		ls.Count, ls.Duration = r.c.Timers, 10*r.c.TimerWindow.D()+time.Minute
		var err error
		plain, err = wire.Run(ctx, wire.Spec{Node: r.node(), Load: ls})
		if plain != nil {
			err = nil // measured; a failed stop does not void it
		}
		return err
	}
	order := []func() error{plainRun, timerRun}
	if rep%2 == 1 {
		order[0], order[1] = order[1], order[0]
	}
	for _, f := range order {
		if err := f(); err != nil {
			return err
		}
	}
	row := tr.Row
	row.PlainMsgsPerSec, row.PlainP99us = plain.MsgsPerSec, float64(plain.Latency.Quantile(0.99))/1e3
	acc.add(row, &tr.Lateness)
	r.result(fmt.Sprintf("timers %.0f msg/s (%.2fx plain %.0f), lateness p99 %.0f ms, max %.0f ms, %d pending at send end",
		row.SendMsgsPerSec, row.SendMsgsPerSec/row.PlainMsgsPerSec, row.PlainMsgsPerSec, row.LatenessP99Ms, row.LatenessMaxMs, row.PendingAtSendEnd))
	return nil
}

// txRound runs one transactional and one plain run of the same client,
// plain first on even rounds.
func (r *runner) txRound(ctx context.Context, rep int, acc *txAcc) error {
	spec := func(tx bool) TxSpec {
		return TxSpec{Node: r.node(), Producers: r.c.Producers, Conns: r.c.Connections, BodyBytes: r.c.BodyBytes, Queues: r.o.Queues,
			Duration: r.c.TxDuration.D(), Transactional: tx}
	}
	var tx, plain *TxResult
	runs := []bool{false, true}
	if rep%2 == 1 {
		runs = []bool{true, false}
	}
	for _, transactional := range runs {
		runtime.GC()
		res, err := RunTx(ctx, spec(transactional))
		if err != nil {
			return err
		}
		if transactional {
			tx = res
		} else {
			plain = res
		}
	}
	acc.add(tx, plain)
	r.result(fmt.Sprintf("transactions %.0f tx/s (%.2fx plain %.0f msg/s), %d committed, %d visible", tx.PerSec, tx.PerSec/plain.PerSec, plain.PerSec,
		tx.Done, tx.Visible))
	return nil
}

// timerAcc accumulates the timer entry's runs.
type timerAcc struct {
	rows []report.TimerRun
	late hist.Histogram
}

func (a *timerAcc) add(row report.TimerRun, late *hist.Histogram) {
	a.rows = append(a.rows, row)
	a.late.Merge(late)
}

// finish fills t with medians over the runs, lateness over all copies
// and the runs' sums.
func (a *timerAcc) finish(t *report.TimerBench) {
	t.Status, t.Runs = "ok", a.rows
	var send, plain, ratio []float64
	for _, r := range a.rows {
		send, plain = append(send, r.SendMsgsPerSec), append(plain, r.PlainMsgsPerSec)
		if r.PlainMsgsPerSec > 0 {
			ratio = append(ratio, r.SendMsgsPerSec/r.PlainMsgsPerSec)
		}
		t.Delivered += r.Delivered
		t.Duplicates += r.Duplicates
		t.Missing += r.Missing
		t.Early += r.Early
	}
	t.SendMsgsPerSec, t.PlainMsgsPerSec, t.SendRatio = ceiling.NewStat(send).Median, ceiling.NewStat(plain).Median, ceiling.NewStat(ratio).Median
	t.LatenessP50Ms = float64(a.late.Quantile(0.5)) / 1e6
	t.LatenessP99Ms = float64(a.late.Quantile(0.99)) / 1e6
	t.LatenessMaxMs = float64(a.late.Max()) / 1e6
}

// txAcc accumulates the transaction entry's runs.
type txAcc struct {
	runs          []report.TxRun
	ratio         []float64
	tx, plain     hist.Histogram
	committed     int64
	visible, errs int64
}

func (a *txAcc) add(tx, plain *TxResult) {
	a.runs = append(a.runs, report.TxRun{TxPerSec: tx.PerSec, PlainMsgsPerSec: plain.PerSec})
	a.ratio = append(a.ratio, tx.PerSec/plain.PerSec)
	a.tx.Merge(&tx.Latency)
	a.plain.Merge(&plain.Latency)
	a.committed += tx.Done
	a.visible += tx.Visible
	a.errs += tx.Errors + plain.Errors
}

func (a *txAcc) finish(x *report.TxBench) {
	x.Status, x.Runs = "ok", a.runs
	var txs, plains []float64
	for _, r := range a.runs {
		txs, plains = append(txs, r.TxPerSec), append(plains, r.PlainMsgsPerSec)
	}
	x.TxPerSec, x.PlainMsgsPerSec, x.Ratio = ceiling.NewStat(txs).Median, ceiling.NewStat(plains).Median, ceiling.NewStat(a.ratio).Median
	x.TxP50us, x.TxP99us = float64(a.tx.Quantile(0.5))/1e3, float64(a.tx.Quantile(0.99))/1e3
	x.PlainP50us, x.PlainP99us = float64(a.plain.Quantile(0.5))/1e3, float64(a.plain.Quantile(0.99))/1e3
	x.Committed, x.Visible, x.Errors = a.committed, a.visible, a.errs
}
