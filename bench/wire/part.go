package wire

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/keelmq/keel/bench/ceiling"
	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/bench/peers"
	"github.com/keelmq/keel/bench/report"
)

// NATSConfig is the bench/peers configuration the wire part compares
// with: NATS JetStream embedded, R1, file storage, default sync (a write
// per message, fsync every 2 minutes).
const NATSConfig = "r1-default"

// NATSTCPConfig is the same NATS configuration with its clients connected
// over TCP on 127.0.0.1, as the generator connects to keel.
const NATSTCPConfig = "r1-default-tcp"

// PartOptions are what RunPart needs from the surrounding `keel bench`
// run.
type PartOptions struct {
	// Scratch is where node stores and NATS stores go (one subdirectory
	// per run, removed afterwards).
	Scratch string
	// Warmup precedes each measured run.
	Warmup time.Duration
	// Queues is the benchmark topic's queue count. Default DefaultQueues.
	Queues int
	// ProfileDirs are searched first for profile names (FindProfile).
	ProfileDirs []string
	// Step is called before each run with a description, Result after a
	// successful one with a one-line summary, and Skip with the number of
	// runs left out after a failure. Each may be nil.
	Step   func(msg string)
	Result func(msg string)
	Skip   func(n int)
}

// Runs is the number of runs RunPart makes for w (Step or Skip is called
// once per run): matrix.Config.WireRuns.
func Runs(w matrix.WireConfig) int {
	c := matrix.Config{Wire: w}
	return c.WireRuns()
}

// RunPart runs the wire part of a benchmark matrix: for every producer
// count and body size, Repeats rounds in which each profile runs once on
// a fresh in-process node (Run) and, when w.WithNATS(), NATS JetStream
// r1-default runs once through bench/peers with the same producers, body
// size, warmup and duration, with its clients in-process and again over
// TCP (NATSTCPConfig), and, when w.WithFloor(), the protocol floor
// (StartFloor) once; the order of the systems rotates from one
// round to the next. It returns one row per system, producer count and
// body size: medians of the runs, latency over all runs, for keel and
// floor rows the ratios to both NATS rows, and for keel rows the ratio to
// the floor. A system whose run fails is reported with
// status "error" and is not run again for that producer count and body
// size. RunPart returns early, with what it has, when ctx ends.
func RunPart(ctx context.Context, w matrix.WireConfig, o PartOptions) []report.Wire {
	out := []report.Wire{}
	if len(w.Profiles) == 0 {
		return out
	}
	if o.Queues <= 0 {
		o.Queues = DefaultQueues
	}
	systems := partSystems(w, o)
	n := 0
	for _, producers := range w.Producers {
		for _, body := range w.BodyBytes {
			accs := make([]*partAcc, len(systems))
			for i, s := range systems {
				accs[i] = newPartAcc(w, s, producers, body)
			}
			for rep := 0; rep < w.Repeats; rep++ {
				for k := range systems {
					i := (k + rep) % len(systems)
					s, a := systems[i], accs[i]
					if a.row.Status != "" {
						if o.Skip != nil {
							o.Skip(1)
						}
						continue
					}
					n++
					if o.Step != nil {
						o.Step(fmt.Sprintf("wire %s/%s p%d %dB run %d/%d", a.row.Name, s.profile, producers, body, rep+1, w.Repeats))
					}
					runtime.GC() // do not bill one system for the previous one's garbage
					m, err := runSystem(ctx, w, o, s, a.row, filepath.Join(o.Scratch, fmt.Sprintf("wire-%d", n)))
					if ctx.Err() != nil {
						return out
					}
					if err != nil {
						a.row.Status, a.row.Note = "error", err.Error()
						if errors.Is(err, peers.ErrSkipped) {
							a.row.Status = "skipped"
						}
						continue
					}
					if o.Result != nil {
						o.Result(fmt.Sprintf("%.0f msg/s, p99 %v", m.mps, time.Duration(m.lat.Quantile(0.99))))
					}
					a.add(m)
				}
			}
			out = append(out, finishRows(systems, accs)...)
		}
	}
	return out
}

// partSystem is one system of the wire part: a keel profile, a NATS
// configuration or the protocol floor.
type partSystem struct {
	nats, floor   bool
	profile, path string
	err           error // the profile could not be found
}

// partSystems lists the systems of w: its profiles, then NATS (in-process
// and over TCP) and the floor when w asks for them.
func partSystems(w matrix.WireConfig, o PartOptions) []partSystem {
	var systems []partSystem
	for _, p := range w.Profiles {
		path, err := FindProfile(p, o.ProfileDirs...)
		systems = append(systems, partSystem{profile: p, path: path, err: err})
	}
	if w.WithNATS() {
		systems = append(systems, partSystem{nats: true, profile: NATSConfig}, partSystem{nats: true, profile: NATSTCPConfig})
	}
	if w.WithFloor() {
		systems = append(systems, partSystem{floor: true, profile: FloorProfile})
	}
	return systems
}

// partAcc accumulates one system's runs at one producer count and body
// size.
type partAcc struct {
	row report.Wire
	mps []float64
	lat hist.Histogram
}

func newPartAcc(w matrix.WireConfig, s partSystem, producers, body int) *partAcc {
	a := &partAcc{row: report.Wire{Name: "keel", Profile: s.profile, Producers: producers, Connections: min(w.Connections, producers),
		Depth: w.Depth, BodyBytes: body, Statuses: map[string]int64{}}}
	switch {
	case s.nats:
		a.row.Name, a.row.Connections, a.row.Depth = "nats-jetstream", min(producers, 8), 0
	case s.floor:
		a.row.Name = FloorName
	}
	if s.err != nil {
		a.row.Status, a.row.Note = "error", s.err.Error()
	}
	return a
}

// add counts one successful run.
func (a *partAcc) add(m partRun) {
	a.mps = append(a.mps, m.mps)
	a.lat.Merge(m.lat)
	for k, v := range m.statuses {
		a.row.Statuses[k] += v
	}
	a.row.Errors += m.errs
	a.row.Note = m.note
	a.row.Runs = append(a.row.Runs, report.Run{MsgsPerSec: m.mps, P99us: us(m.lat.Quantile(0.99))})
}

// partRun is what one run of one system measured.
type partRun struct {
	mps      float64
	lat      *hist.Histogram
	statuses map[string]int64
	errs     int64
	note     string
}

// runSystem runs s once with row's producers, connections, depth and body
// size, in dir.
func runSystem(ctx context.Context, w matrix.WireConfig, o PartOptions, s partSystem, row report.Wire, dir string) (partRun, error) {
	load := LoadSpec{Queues: o.Queues, Producers: row.Producers, Conns: w.Connections, Depth: w.Depth, BodyBytes: row.BodyBytes,
		Warmup: o.Warmup, Duration: w.Duration.D()}
	switch {
	case s.floor:
		r, err := runFloor(ctx, load)
		if err != nil {
			return partRun{}, err
		}
		return partRun{mps: r.MsgsPerSec, lat: &r.Latency, statuses: r.Statuses, errs: r.Errors,
			note: fmt.Sprintf("keel's remoting server in this process with a send handler that stores nothing, %d TCP conns × depth %d on 127.0.0.1, SEND_MESSAGE (10)",
				row.Connections, w.Depth)}, nil
	case s.nats:
		r, err := peers.Run(ctx, peers.Spec{System: "nats", Config: s.profile, Dir: dir, Producers: row.Producers, BodyBytes: row.BodyBytes,
			Warmup: o.Warmup, Duration: w.Duration.D()})
		if err != nil {
			return partRun{}, err
		}
		m := partRun{mps: r.MsgsPerSec, lat: &r.Latency, errs: r.Errors, note: r.Note, statuses: map[string]int64{StatusOK: r.Msgs}}
		if r.Errors > 0 {
			m.statuses[StatusError] = r.Errors
		}
		return m, nil
	}
	r, err := Run(ctx, Spec{Node: NodeSpec{Profile: s.path, Dir: dir, SegmentSize: int64(w.SegmentSize), Queues: o.Queues}, Load: load})
	if r == nil {
		return partRun{}, err
	}
	m := partRun{mps: r.MsgsPerSec, lat: &r.Latency, statuses: r.Statuses, errs: r.Errors,
		note: fmt.Sprintf("keel node in this process, profile %s, %d TCP conns × depth %d on 127.0.0.1, SEND_MESSAGE (10)",
			s.profile, row.Connections, w.Depth)}
	if r.FirstError != "" {
		m.note += "; first error: " + r.FirstError
	}
	if err != nil { // measured, but the node did not stop cleanly
		m.note += "; " + err.Error()
	}
	return m, nil
}

// finishRows turns the accumulated runs into rows: medians and latency
// quantiles for the systems that ran, and the ratios of every non-NATS
// row to both NATS rows and of every keel row to the floor.
func finishRows(systems []partSystem, accs []*partAcc) []report.Wire {
	var natsMPS, natsTCPMPS, floorMPS float64
	for i, a := range accs {
		if a.row.Status != "" {
			continue
		}
		a.row.Status = "ok"
		st := ceiling.NewStat(a.mps)
		a.row.MsgsPerSec, a.row.MsgsPerSecMin, a.row.MsgsPerSecMax = st.Median, st.Min, st.Max
		a.row.P50us, a.row.P99us, a.row.P999us = us(a.lat.Quantile(0.5)), us(a.lat.Quantile(0.99)), us(a.lat.Quantile(0.999))
		a.row.CDF = report.ThinCDF(&a.lat)
		switch {
		case systems[i].nats && systems[i].profile == NATSConfig:
			natsMPS = a.row.MsgsPerSec
		case systems[i].nats:
			natsTCPMPS = a.row.MsgsPerSec
		case systems[i].floor:
			floorMPS = a.row.MsgsPerSec
		}
	}
	out := make([]report.Wire, 0, len(accs))
	for i, a := range accs {
		ok := a.row.Status == "ok" && !systems[i].nats
		if ok && natsMPS > 0 {
			a.row.NATSMsgsPerSec = natsMPS
			a.row.RatioToNATS = a.row.MsgsPerSec / natsMPS
		}
		if ok && natsTCPMPS > 0 {
			a.row.NATSTCPMsgsPerSec = natsTCPMPS
			a.row.RatioToNATSTCP = a.row.MsgsPerSec / natsTCPMPS
		}
		if ok && !systems[i].floor && floorMPS > 0 {
			a.row.FloorMsgsPerSec = floorMPS
			a.row.RatioToFloor = a.row.MsgsPerSec / floorMPS
		}
		out = append(out, a.row)
	}
	return out
}

// runFloor drives a fresh protocol floor (StartFloor) with ls.
func runFloor(ctx context.Context, ls LoadSpec) (*Result, error) {
	addr, stop, err := StartFloor()
	if err != nil {
		return nil, err
	}
	defer stop()
	ls.Addr = addr
	return Load(ctx, ls)
}

func us(ns int64) float64 { return float64(ns) / 1e3 }
