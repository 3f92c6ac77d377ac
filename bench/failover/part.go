package failover

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/keelmq/keel/bench/ceiling"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/bench/report"
)

// PartOptions are what RunPart needs from the surrounding `keel bench`
// run.
type PartOptions struct {
	// Scratch is where the runs' stores go (one subdirectory per run,
	// removed afterwards).
	Scratch string
	// Step is called before each run with a description, Result after a
	// successful one with a one-line summary, and Skip with the number of
	// runs left out after a failure. Each may be nil.
	Step   func(msg string)
	Result func(msg string)
	Skip   func(n int)
}

// Notes explaining the rows, written into each row's note.
const (
	noteSync  = "the new master answers SLAVE_NOT_AVAILABLE (stored, not acknowledged) until the old master, restarted once the route names the new one, is back in its SyncStateSet (the shipped sync profile keeps min_in_sync_replicas at wait_replicas)"
	noteAsync = "async replication: messages acknowledged by the old master but not yet replicated are lost"
	noteNATS  = "nats-server v2.15.2 (embedded, one child process each), file storage, R3; publish ack timeout 500ms"
)

// RunPart runs the failover part: for every crash kind of f, for every
// replication plugin of f and NATS JetStream R3 when f.NATS, f.Repeats
// runs (RunKeel, RunNATS), and returns one row each with the medians. A
// setting whose run fails is reported with status "error" and not run
// again. RunPart returns early,
// with what it has, when ctx ends.
func RunPart(ctx context.Context, f matrix.FailoverConfig, o PartOptions) []report.Failover {
	out := []report.Failover{}
	type job struct{ system, repl, note string }
	var jobs []job
	for _, r := range f.Replication {
		note := noteAsync
		if r == matrix.FailoverSync {
			note = noteSync
		}
		jobs = append(jobs, job{"keel", r, note})
	}
	if f.NATS {
		jobs = append(jobs, job{"nats-jetstream", "R3", noteNATS})
	}
	n := 0
	for _, crash := range f.Crash {
		for _, j := range jobs {
			out = append(out, runRow(ctx, f, o, crash, j.system, j.repl, j.note, &n))
			if ctx.Err() != nil {
				return out
			}
		}
	}
	return out
}

// runRow runs one row's repeats; n numbers the runs' directories.
func runRow(ctx context.Context, f matrix.FailoverConfig, o PartOptions, crash, system, repl, note string, n *int) report.Failover {
	step, result, skip := o.Step, o.Result, o.Skip
	if step == nil {
		step = func(string) {}
	}
	if result == nil {
		result = func(string) {}
	}
	if skip == nil {
		skip = func(int) {}
	}
	row := report.Failover{System: system, Replication: repl, Crash: crash, Producers: f.Producers, BodyBytes: f.BodyBytes, Repeats: f.Repeats, Note: note}
	for rep := 0; rep < f.Repeats; rep++ {
		*n++
		step(fmt.Sprintf("failover %s/%s %s run %d/%d", system, repl, crash, rep+1, f.Repeats))
		dir := filepath.Join(o.Scratch, fmt.Sprintf("failover-%d", *n))
		var r *Result
		var err error
		if system == "keel" {
			r, err = RunKeel(ctx, KeelSpec{Dir: dir, Replication: repl, Crash: crash, Producers: f.Producers, BodyBytes: f.BodyBytes, Queues: f.Queues,
				Before: f.Before.D(), After: f.After.D(), MaxWait: f.MaxWait.D(), HeartbeatTimeout: f.HeartbeatTimeout.D()})
		} else {
			r, err = RunNATS(ctx, NATSSpec{Dir: dir, Crash: crash, Producers: f.Producers, BodyBytes: f.BodyBytes, Before: f.Before.D(), After: f.After.D(),
				MaxWait: f.MaxWait.D()})
		}
		if ctx.Err() != nil {
			return row
		}
		if err != nil {
			row.Status, row.Note = "error", err.Error()
			skip(f.Repeats - rep - 1)
			break
		}
		result(fmt.Sprintf("first ack %s, consumer %s, %d of %d acked lost", fmtMs(r.FirstOKMs), fmtMs(r.ConsumerResumeMs), r.AckedLost, r.Acked))
		row.Runs = append(row.Runs, report.FailoverRun{FirstStoredMs: r.FirstStoredMs, FirstOKMs: r.FirstOKMs, ConsumerResumeMs: r.ConsumerResumeMs,
			Acked: r.Acked, AckedLost: r.AckedLost, Errors: r.Errors, FirstError: r.FirstError, OldMasterResumed: r.OldMasterResumed})
	}
	if row.Status == "" {
		summarize(&row)
	}
	return row
}

// summarize fills row's medians from its runs: each time over the runs
// in which the event happened (-1 when in none).
func summarize(row *report.Failover) {
	row.Status = "ok"
	median := func(get func(report.FailoverRun) float64) ceiling.Stat {
		var v []float64
		for _, r := range row.Runs {
			if x := get(r); x >= 0 {
				v = append(v, x)
			}
		}
		if len(v) == 0 {
			return ceiling.Stat{Median: -1, Min: -1, Max: -1}
		}
		return ceiling.NewStat(v)
	}
	ok := median(func(r report.FailoverRun) float64 { return r.FirstOKMs })
	row.FirstOKMs, row.FirstOKMsMin, row.FirstOKMsMax = ok.Median, ok.Min, ok.Max
	row.FirstStoredMs = median(func(r report.FailoverRun) float64 { return r.FirstStoredMs }).Median
	row.ConsumerResumeMs = median(func(r report.FailoverRun) float64 { return r.ConsumerResumeMs }).Median
	row.Acked = int64(median(func(r report.FailoverRun) float64 { return float64(r.Acked) }).Median)
	for _, r := range row.Runs {
		if r.FirstOKMs < 0 {
			row.Missed++
		}
		if r.OldMasterResumed {
			row.OldMasterResumed++
		}
		row.AckedLostRuns = append(row.AckedLostRuns, r.AckedLost)
		row.AckedLost = max(row.AckedLost, r.AckedLost)
	}
}

func fmtMs(ms float64) string {
	if ms < 0 {
		return "never"
	}
	return fmt.Sprintf("%.0fms", ms)
}
