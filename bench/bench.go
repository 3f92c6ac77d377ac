// Package bench is `keel bench`: it runs a benchmark matrix (configs/bench/*.toml,
// see package bench/matrix) of real keel engines, measures the disk's own
// limits and real peers in the same run, and writes OUT/results.json
// (schema in package bench/report and docs/benchmarks.md), results.csv,
// report.md with SVG charts, and a summary table on standard output.
//
// cmd/keel calls Main with the arguments after "bench":
//
//	keel bench --config FILE --out DIR [--quick] [--skip LIST] [--scratch DIR]
//
//	--config FILE  the matrix (required)
//	--out DIR      where results go (default "bench-out")
//	--quick        trim durations and repeats to finish in under 3 minutes
//	               (matrix.Config.Quick)
//	--skip LIST    comma-separated parts not to run: ceiling, cells, peers,
//	               recovery, wire, semantics, failover
//	--scratch DIR  where benchmark stores live (default OUT/scratch; it must
//	               be on the disk you want to measure), removed afterwards
//	--plugin-dir DIR  where external plugin binaries are (keel-flush,
//	               keel-index-hash); default: next to the executable, ./bin,
//	               PATH. Cells in external mode are skipped without them.
//
// The matrix's axes name builtin plugins from a catalog (default
// internal/builtins.Catalog(), keel's own), or [plugins] tables (see
// package bench/matrix): a build with plugins compiled in passes its own
// catalog with WithCatalog, so the matrix can bench them by name:
//
//	bench.Main(os.Args[1:], bench.WithCatalog(myCatalog))
//
// The recovery workload re-executes the running program with the same
// arguments and recovery.ChildEnv set, the failover part with
// failover.ChildEnv set (its keel and NATS nodes); Main handles both cases
// itself (recovery.MaybeChild, failover.MaybeChild), so a main that
// forwards to Main needs nothing else.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/keelmq/keel/bench/ceiling"
	"github.com/keelmq/keel/bench/engine"
	"github.com/keelmq/keel/bench/failover"
	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/bench/peers"
	"github.com/keelmq/keel/bench/recovery"
	"github.com/keelmq/keel/bench/report"
	"github.com/keelmq/keel/bench/semantics"
	"github.com/keelmq/keel/bench/wire"
	"github.com/keelmq/keel/host"
)

// Parts of a run that --skip can leave out.
const (
	PartCeiling  = "ceiling"
	PartCells    = "cells"
	PartPeers    = "peers"
	PartRecovery = "recovery"
	// PartWire is keel end to end over the RocketMQ protocol beside NATS
	// JetStream (the matrix's [wire] section, package bench/wire).
	PartWire = "wire"
	// PartSemantics is timer messages and transactional sends beside
	// plain sends (the matrix's [semantics] section, package
	// bench/semantics).
	PartSemantics = "semantics"
	// PartFailover is kill -9 of a cluster-mode master under load beside
	// NATS JetStream R3 (the matrix's [failover] section, package
	// bench/failover).
	PartFailover = "failover"
)

// Options configures Run.
type Options struct {
	// ConfigFile is recorded in the results.
	ConfigFile string
	// Out is the output directory.
	Out string
	// Quick marks the run as --quick (the config should already be
	// trimmed with Quick).
	Quick bool
	// Scratch is where stores and probe files go; default Out/scratch.
	Scratch string
	// Skip leaves parts out (PartCeiling, ...).
	Skip map[string]bool
	// PluginDirs are searched first for external plugin binaries
	// (keel-flush, keel-index-hash); then the running executable's
	// directory, ./bin and PATH.
	PluginDirs []string
	// Catalog has the builtin plugins the matrix's axes may name (it
	// must be the one cfg was parsed with); nil means
	// matrix.DefaultCatalog(), keel's own.
	Catalog *host.Catalog
	// Progress receives live progress (default os.Stderr); Summary the
	// final table (default os.Stdout).
	Progress, Summary io.Writer
}

// MainOption configures Main.
type MainOption func(*Options)

// WithCatalog makes Main parse the matrix against, and run the builtin
// names from, cat instead of keel's own catalog: a main that compiles
// third-party plugins in passes the catalog it gives its nodes.
func WithCatalog(cat *host.Catalog) MainOption { return func(o *Options) { o.Catalog = cat } }

// Main runs `keel bench` with args (the arguments after "bench").
func Main(args []string, opts ...MainOption) error {
	recovery.MaybeChild()
	failover.MaybeChild()
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	if o.Catalog == nil {
		o.Catalog = matrix.DefaultCatalog()
	}
	fl := flag.NewFlagSet("keel bench", flag.ContinueOnError)
	cfgPath := fl.String("config", "", "benchmark matrix TOML file (required), e.g. configs/bench/quick.toml")
	out := fl.String("out", "bench-out", "output directory for results.json, results.csv, report.md and charts")
	quick := fl.Bool("quick", false, "trim durations and repeats to finish in under 3 minutes")
	skip := fl.String("skip", "", "comma-separated parts to skip: ceiling, cells, peers, recovery, wire, semantics, failover")
	scratch := fl.String("scratch", "", "directory for benchmark stores (default OUT/scratch)")
	pluginDir := fl.String("plugin-dir", "", "directory holding external plugin binaries (keel-flush, keel-index-hash); default: next to this executable, ./bin, PATH")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("keel bench: unexpected arguments %q", fl.Args())
	}
	if *cfgPath == "" {
		return errors.New("keel bench: --config is required")
	}
	cfg, err := matrix.Load(*cfgPath, o.Catalog)
	if err != nil {
		return err
	}
	if *quick {
		cfg = cfg.Quick()
	}
	o.ConfigFile, o.Out, o.Quick, o.Scratch, o.Skip = *cfgPath, *out, *quick, *scratch, map[string]bool{}
	if *pluginDir != "" {
		o.PluginDirs = []string{*pluginDir}
	}
	for _, s := range strings.Split(*skip, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains([]string{PartCeiling, PartCells, PartPeers, PartRecovery, PartWire, PartSemantics, PartFailover}, s) {
			return fmt.Errorf("keel bench: --skip %q: want ceiling, cells, peers, recovery, wire, semantics or failover", s)
		}
		o.Skip[s] = true
	}
	// Plugins log through slog's default logger; keep the progress
	// display readable and show only errors (replication plugins warn
	// about every connection a cell's teardown closes).
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, err = Run(ctx, cfg, o)
	return err
}

// Run runs cfg and writes the results into o.Out. It returns the results
// even when writing them failed.
func Run(ctx context.Context, cfg *matrix.Config, o Options) (*report.Results, error) {
	if o.Out == "" {
		return nil, errors.New("bench: Options.Out is required")
	}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	if o.Summary == nil {
		o.Summary = os.Stdout
	}
	if o.Scratch == "" {
		o.Scratch = filepath.Join(o.Out, "scratch")
	}
	if err := os.MkdirAll(o.Scratch, 0o755); err != nil {
		return nil, fmt.Errorf("bench: create scratch dir: %w", err)
	}
	defer os.RemoveAll(o.Scratch)
	if o.Catalog == nil {
		o.Catalog = matrix.DefaultCatalog()
	}
	ld := &engine.Loader{Catalog: o.Catalog, PluginDirs: o.PluginDirs, File: o.ConfigFile}
	res := &report.Results{SchemaVersion: report.SchemaVersion, Tool: "keel bench", Config: cfg.Name, ConfigFile: o.ConfigFile,
		Quick: o.Quick, StartedAt: time.Now(), Machine: machineInfo(o.Scratch),
		Settings: report.Settings{DurationMs: cfg.Duration.D().Milliseconds(), WarmupMs: cfg.Warmup.D().Milliseconds(),
			Repeats: cfg.Repeats, SegmentSize: int64(cfg.SegmentSize), Queues: cfg.Queues},
		Ceilings: report.Ceilings{GroupCommitPerSec: map[string]float64{}}, Cells: []report.Cell{}, Peers: []report.Peer{},
		Recovery: []report.Recovery{}, Wire: []report.Wire{}, Notes: []string{}}

	pr := newProgress(o.Progress, planSteps(cfg, o.Skip))
	fmt.Fprintf(o.Progress, "keel bench %s: %d cells × %d runs of %v, estimated at least %v\n", cfg.Name, len(cfg.Cells()), cfg.Repeats,
		cfg.Duration.D(), cfg.Estimate().Round(time.Second))

	var ceil *ceiling.Result
	if !o.Skip[PartCeiling] && !cfg.Ceiling.Disabled {
		var rb []int
		for _, b := range cfg.BodySizes() {
			rb = append(rb, engine.RecordSize(b))
		}
		if len(rb) == 0 {
			rb = []int{engine.RecordSize(128)}
		}
		c, err := ceiling.Run(ctx, ceiling.Options{Dir: filepath.Join(o.Scratch, "ceiling"), FileSize: int64(cfg.Ceiling.FileSize),
			Duration: cfg.Ceiling.Duration.D(), Repeats: cfg.Ceiling.Repeats, RecordBytes: rb, Producers: cfg.Ceiling.Producers,
			Progress: func(msg string) { pr.step(msg) }})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res.Notes = append(res.Notes, "ceiling probes failed: "+err.Error())
		} else {
			ceil = c
			res.Ceilings.Detail = c
			res.Ceilings.SeqWriteMBPerSec = c.SeqMBPerSec(ceiling.MethodMmap, 1<<20)
			res.Ceilings.SerialFdatasyncPerSec = c.SerialPerSec(rb[0])
			for _, p := range cfg.Ceiling.Producers {
				res.Ceilings.GroupCommitPerSec[strconv.Itoa(p)] = c.GroupPerSec(p, rb[0])
			}
		}
	}

	if !o.Skip[PartCells] {
		for i, cell := range cfg.Cells() {
			rc := runCell(ctx, cfg, o, ld, pr, i, cell, ceil)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res.Cells = append(res.Cells, rc)
		}
	}
	if !o.Skip[PartPeers] {
		res.Peers = runPeers(ctx, cfg, o, pr)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !o.Skip[PartWire] {
		res.Wire = wire.RunPart(ctx, cfg.Wire, wire.PartOptions{Scratch: o.Scratch, Warmup: cfg.Warmup.D(), Queues: cfg.Queues,
			Step: pr.step, Result: pr.result, Skip: pr.skip})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !o.Skip[PartSemantics] {
		res.Semantics = semantics.RunPart(ctx, cfg.Semantics, semantics.PartOptions{Scratch: o.Scratch, Queues: cfg.Queues,
			SegmentSize: int64(cfg.Wire.SegmentSize), Step: pr.step, Result: pr.result, Skip: pr.skip})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !o.Skip[PartFailover] && cfg.Failover.Enabled() {
		res.Failover = failover.RunPart(ctx, cfg.Failover, failover.PartOptions{Scratch: o.Scratch, Step: pr.step, Result: pr.result, Skip: pr.skip})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !o.Skip[PartRecovery] {
		res.Recovery = runRecovery(ctx, cfg, o, pr)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	pr.done()
	res.Notes = append(res.Notes, notes(res)...)
	res.FinishedAt = time.Now()
	res.Machine.LoadAvgEnd = loadAvg()
	if l := max(res.Machine.LoadAvgStart, res.Machine.LoadAvgEnd); l > float64(res.Machine.CPUs) {
		res.Notes = append(res.Notes, fmt.Sprintf("The machine was busy with other work (load average %.1f on %d CPUs): numbers are depressed and noisy.", l, res.Machine.CPUs))
	}
	if err := res.WriteAll(o.Out); err != nil {
		return res, err
	}
	fmt.Fprintln(o.Summary)
	if err := res.WriteTable(o.Summary); err != nil {
		return res, err
	}
	fmt.Fprintf(o.Summary, "\nresults: %s (results.json, results.csv, report.md, *.svg)\n", o.Out)
	return res, nil
}

// planSteps counts the progress steps of a run.
func planSteps(cfg *matrix.Config, skip map[string]bool) int {
	n := 0
	if !skip[PartCeiling] && !cfg.Ceiling.Disabled {
		bodies := max(len(cfg.BodySizes()), 1)
		n += cfg.Ceiling.Repeats * (4 + 2*bodies + 2*bodies*len(cfg.Ceiling.Producers))
	}
	if !skip[PartCells] {
		n += len(cfg.Cells()) * cfg.Repeats
	}
	if !skip[PartPeers] {
		n += (len(cfg.Peers.NATS) + len(cfg.Peers.Redis)) * len(cfg.Peers.Producers) * len(cfg.Peers.BodyBytes) * cfg.Peers.Repeats
	}
	if !skip[PartWire] {
		n += cfg.WireRuns()
	}
	if !skip[PartSemantics] {
		n += cfg.SemanticsRuns()
	}
	if !skip[PartFailover] {
		n += cfg.FailoverRuns()
	}
	if !skip[PartRecovery] {
		n += cfg.RecoveryRuns()
	}
	return n
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

func runCell(ctx context.Context, cfg *matrix.Config, o Options, ld *engine.Loader, pr *progress, i int, cell matrix.Cell, ceil *ceiling.Result) report.Cell {
	plugins := cfg.PluginsOf(cell)
	rc := report.Cell{Workload: cell.Workload, Flush: cell.Flush, Replication: cell.Replication, Index: cell.Index, Mode: cell.Mode,
		BodyBytes: cell.BodyBytes, Producers: cell.Producers, Statuses: map[string]int64{}, RecordBytes: engine.RecordSize(cell.BodyBytes),
		Plugins: plugins.List()}
	probes := !o.Skip[PartCeiling] && !cfg.Ceiling.Disabled
	durable := false
	if probes {
		pol, err := ld.FlushPolicy(ctx, plugins.Flush)
		if err != nil {
			rc.Status, rc.Note = "error", err.Error()
			if errors.Is(err, engine.ErrUnavailable) {
				rc.Status = "skipped"
			}
			pr.skip(cfg.Repeats)
			return rc
		}
		durable = pol.WaitFlush
	}
	var pair *pairProbe
	if durable {
		pair = newPairProbe(cfg, pairDir(o, i), ceil, cell.Producers, rc.RecordBytes)
	}
	var runs []*engine.Result
	for rep := 0; rep < cfg.Repeats; rep++ {
		pr.step(fmt.Sprintf("cell %s run %d/%d", cell.Key(), rep+1, cfg.Repeats))
		var probe float64
		if pair != nil {
			v, err := pair.probe(ctx)
			if err != nil {
				rc.Note = err.Error()
				pair = nil
			}
			probe = v
		}
		r, err := engine.Run(ctx, engine.Spec{Cell: cell, Plugins: plugins, Loader: ld, Dir: filepath.Join(o.Scratch, fmt.Sprintf("cell-%d-%d", i, rep)),
			Warmup: cfg.Warmup.D(), Duration: cfg.Duration.D(), SegmentSize: int64(cfg.SegmentSize), Queues: cfg.Queues})
		if errors.Is(err, engine.ErrUnavailable) {
			rc.Status, rc.Note = "skipped", err.Error()
			pr.skip(cfg.Repeats - rep - 1)
			return rc
		}
		if err != nil && r == nil {
			rc.Status, rc.Note = "error", err.Error()
			pr.skip(cfg.Repeats - rep - 1)
			return rc
		}
		if err != nil {
			rc.Note = err.Error() // measured, but teardown failed
		}
		pr.result(fmt.Sprintf("%s msg/s, p99 %s", human(r.MsgsPerSec), time.Duration(r.Latency.Quantile(0.99))))
		runs = append(runs, r)
		if pair != nil {
			pair.add(probe, r.MsgsPerSec)
		}
	}
	rc.Status = "ok"
	var mps, cpu, fs, lag, cons []float64
	var lat, e2e hist.Histogram
	for _, r := range runs {
		rc.Impl = r.Impl
		mps = append(mps, r.MsgsPerSec)
		cpu = append(cpu, r.CPUSecPerMillion)
		fs = append(fs, r.FsyncsPerSec)
		lag = append(lag, r.ReplLagMeanBytes)
		cons = append(cons, r.ConsumePerSec)
		lat.Merge(&r.Latency)
		e2e.Merge(&r.EndToEnd)
		for k, v := range r.Statuses {
			rc.Statuses[k] += v
		}
		rc.ReplLagMaxBytes = max(rc.ReplLagMaxBytes, r.ReplLagMaxBytes)
		rc.Runs = append(rc.Runs, report.Run{MsgsPerSec: r.MsgsPerSec, P99us: us(r.Latency.Quantile(0.99))})
	}
	st := ceiling.NewStat(mps)
	rc.MsgsPerSec, rc.MsgsPerSecMin, rc.MsgsPerSecMax = st.Median, st.Min, st.Max
	rc.MBPerSec = rc.MsgsPerSec * float64(cell.BodyBytes) / 1e6
	rc.P50us, rc.P99us, rc.P999us = us(lat.Quantile(0.5)), us(lat.Quantile(0.99)), us(lat.Quantile(0.999))
	rc.CPUSecPerMillion = ceiling.NewStat(cpu).Median
	rc.FsyncsPerSec = ceiling.NewStat(fs).Median
	rc.ReplLagMeanBytes = ceiling.NewStat(lag).Median
	if cell.Workload == matrix.WorkloadProduceConsume {
		rc.ConsumeMsgsPerSec = ceiling.NewStat(cons).Median
		rc.EndToEndP99us = us(e2e.Quantile(0.99))
	}
	rc.CDF = report.ThinCDF(&lat)
	if ceil != nil {
		rc.Ceiling, rc.CeilingValue = cellCeiling(ceil, cell, durable, rc.RecordBytes)
		if rc.CeilingValue > 0 {
			rc.CeilingRatio = rc.MsgsPerSec / rc.CeilingValue
		}
	}
	rc.Paired = pair.result()
	return rc
}

// cellCeiling names the run's ceiling a cell is compared with and gives it
// in messages per second: the group-commit ceiling at the same producer
// count when acks wait for fdatasync (durable: the flush policy's
// WaitFlush), otherwise the sequential bandwidth divided by the stored
// record size.
func cellCeiling(c *ceiling.Result, cell matrix.Cell, durable bool, recordBytes int) (string, float64) {
	if durable {
		if v := c.GroupPerSec(cell.Producers, recordBytes); v > 0 {
			return fmt.Sprintf("group commit p%d", cell.Producers), v
		}
		if cell.Producers == 1 {
			return "serial fdatasync", c.SerialPerSec(recordBytes)
		}
		return "", 0
	}
	mb := c.SeqMBPerSec(ceiling.MethodMmap, 1<<20)
	if mb <= 0 {
		mb = c.BestSeqMBPerSec()
	}
	return "seq write", mb * 1e6 / float64(recordBytes)
}

func runPeers(ctx context.Context, cfg *matrix.Config, o Options, pr *progress) []report.Peer {
	out := []report.Peer{}
	type job struct{ system, name, config string }
	var jobs []job
	for _, c := range cfg.Peers.NATS {
		jobs = append(jobs, job{"nats", "nats-jetstream", c})
	}
	for _, c := range cfg.Peers.Redis {
		jobs = append(jobs, job{"redis", "redis", c})
	}
	n := 0
	for _, j := range jobs {
		for _, p := range cfg.Peers.Producers {
			for _, body := range cfg.Peers.BodyBytes {
				rp := report.Peer{Name: j.name, Config: j.config, Producers: p, BodyBytes: body}
				var mps []float64
				var lat hist.Histogram
				for rep := 0; rep < cfg.Peers.Repeats; rep++ {
					pr.step(fmt.Sprintf("peer %s/%s p%d %dB run %d/%d", j.name, j.config, p, body, rep+1, cfg.Peers.Repeats))
					n++
					r, err := peers.Run(ctx, peers.Spec{System: j.system, Config: j.config, Dir: filepath.Join(o.Scratch, fmt.Sprintf("peer-%d", n)),
						Producers: p, BodyBytes: body, Warmup: cfg.Warmup.D(), Duration: cfg.Peers.Duration.D()})
					if ctx.Err() != nil {
						return out
					}
					if err != nil {
						rp.Status, rp.Note = "error", err.Error()
						if errors.Is(err, peers.ErrSkipped) {
							rp.Status = "skipped"
						}
						pr.skip(cfg.Peers.Repeats - rep - 1)
						break
					}
					pr.result(fmt.Sprintf("%s msg/s, p99 %s", human(r.MsgsPerSec), time.Duration(r.Latency.Quantile(0.99))))
					mps = append(mps, r.MsgsPerSec)
					lat.Merge(&r.Latency)
					rp.Errors += r.Errors
					rp.Note = r.Note
					rp.Runs = append(rp.Runs, report.Run{MsgsPerSec: r.MsgsPerSec, P99us: us(r.Latency.Quantile(0.99))})
				}
				if rp.Status == "" {
					rp.Status = "ok"
					st := ceiling.NewStat(mps)
					rp.MsgsPerSec, rp.MsgsPerSecMin, rp.MsgsPerSecMax = st.Median, st.Min, st.Max
					rp.P50us, rp.P99us, rp.P999us = us(lat.Quantile(0.5)), us(lat.Quantile(0.99)), us(lat.Quantile(0.999))
					rp.CDF = report.ThinCDF(&lat)
				}
				out = append(out, rp)
			}
		}
	}
	return out
}

func runRecovery(ctx context.Context, cfg *matrix.Config, o Options, pr *progress) []report.Recovery {
	out := []report.Recovery{}
	rc := cfg.Recovery
	sizes := slices.Clone(rc.Sizes)
	slices.Sort(sizes)
	bodies := slices.Clone([]int(rc.BodyBytes))
	slices.Sort(bodies)
	n := 0
	for _, crash := range rc.Crashes {
		for _, flush := range rc.Flush {
			for _, body := range bodies {
				for _, size := range sizes {
					x := report.Recovery{Profile: flush + "-flush", BodyBytes: body, TargetBytes: int64(size), Crash: crash, Repeats: rc.Repeats}
					if crash == recovery.PowerCut && size > rc.MaxPowerCutSize {
						x.Status = "skipped"
						x.Note = fmt.Sprintf("above max_powercut_size %v (CrashFS keeps the store in memory twice)", rc.MaxPowerCutSize)
						pr.skip(rc.Repeats)
						out = append(out, x)
						continue
					}
					var ready, disp, stored, acked, trunc, scan []float64
					phases := map[string][]float64{}
					for rep := 0; rep < rc.Repeats; rep++ {
						n++
						pr.step(fmt.Sprintf("recovery %s %s-flush %dB %v run %d/%d", crash, flush, body, size, rep+1, rc.Repeats))
						dir := "/store"
						if crash == recovery.Kill9 {
							dir = filepath.Join(o.Scratch, fmt.Sprintf("recovery-%d", n))
						}
						r, err := recovery.Run(ctx, recovery.Spec{Dir: dir, Size: int64(size), Crash: crash, Flush: flush, Producers: rc.Producers,
							BodyBytes: body, SegmentSize: int64(rc.SegmentSize), Seed: int64(n)})
						if ctx.Err() != nil {
							return out
						}
						if err != nil {
							x.Status, x.Note = "error", err.Error()
							pr.skip(rc.Repeats - rep - 1)
							break
						}
						pr.result(fmt.Sprintf("ready %.0f ms, dispatched %.0f ms, %d acked lost", r.ReadyMs, r.DispatchedMs, r.AckedLost))
						ready = append(ready, r.ReadyMs)
						disp = append(disp, r.DispatchedMs)
						stored = append(stored, float64(r.StoreBytes))
						acked = append(acked, float64(r.Acked))
						trunc = append(trunc, float64(r.Truncated))
						scan = append(scan, float64(r.ScanBytes))
						for name, ms := range r.PhasesMs {
							phases[name] = append(phases[name], ms)
						}
						x.AckedLostRuns = append(x.AckedLostRuns, r.AckedLost)
						x.AckedLost = max(x.AckedLost, r.AckedLost)
					}
					if x.Status == "" {
						x.Status = "ok"
						rs, ds := ceiling.NewStat(ready), ceiling.NewStat(disp)
						x.ReadyMs, x.ReadyMsMin, x.ReadyMsMax = rs.Median, rs.Min, rs.Max
						x.DispatchedMs, x.DispatchedMsMin, x.DispatchedMsMax = ds.Median, ds.Min, ds.Max
						x.StoreBytes = int64(ceiling.NewStat(stored).Median)
						x.Acked = int64(ceiling.NewStat(acked).Median)
						x.TruncatedBytes = int64(ceiling.NewStat(trunc).Median)
						x.ScanBytes = int64(ceiling.NewStat(scan).Median)
						if len(phases) > 0 {
							x.PhasesMs = map[string]float64{}
							for name, v := range phases {
								x.PhasesMs[name] = ceiling.NewStat(v).Median
							}
						}
					}
					out = append(out, x)
				}
			}
		}
	}
	return out
}

// notes explains what the reader must know about this run.
func notes(r *report.Results) []string {
	var out []string
	skipped := 0
	for _, c := range r.Cells {
		if c.Status == "skipped" {
			skipped++
		}
	}
	if skipped > 0 {
		out = append(out, fmt.Sprintf("%d cells were skipped: nothing is registered for them yet (see each cell's note).", skipped))
	}
	seen := map[string]bool{}
	for _, p := range r.Peers {
		if p.Status == "skipped" && !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, fmt.Sprintf("Peer %s skipped: %s", p.Name, p.Note))
		}
	}
	if len(r.Peers) > 0 {
		out = append(out, "Peers share this machine's disk and CPUs with their replicas and clients (R3 JetStream, Redis replica): replication peers are pessimistic stand-ins for real clusters.")
	}
	return out
}

func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
