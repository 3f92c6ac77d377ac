package bench

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/keelmq/keel/bench/ceiling"
	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/bench/report"
)

// pairProbe is a durable cell's own ceiling probe: the group-commit probe
// at the cell's producer count and stored record size, run right before
// each of the cell's runs (probe, run, probe, run, ...), so that each run
// is divided by the disk of the same minute. A virtual disk whose
// fdatasync latency drifts during a run moves a ratio to a probe measured
// minutes earlier more than the code does.
type pairProbe struct {
	o              ceiling.Options
	m              ceiling.Method
	producers, rec int
	perSec, ratios []float64
}

// newPairProbe probes in dir with the matrix's ceiling settings, by the
// method that won the run's group-commit probe at the cell's producer
// count (ceil may be nil: mmap, the store's).
func newPairProbe(cfg *matrix.Config, dir string, ceil *ceiling.Result, producers, recordBytes int) *pairProbe {
	return &pairProbe{o: ceiling.Options{Dir: dir, FileSize: int64(cfg.Ceiling.FileSize), Duration: cfg.Ceiling.Duration.D()},
		m: ceil.GroupMethod(producers, recordBytes), producers: producers, rec: recordBytes}
}

// probe runs the probe once, before a run; it returns its records/s.
func (p *pairProbe) probe(ctx context.Context) (float64, error) {
	r, err := ceiling.GroupCommitRun(ctx, p.o, p.m, p.producers, p.rec)
	if err != nil {
		return 0, fmt.Errorf("paired ceiling probe: %w", err)
	}
	return r.PerSec, nil
}

// add records a pair: the probe's records/s and the run's msgs/s.
func (p *pairProbe) add(probePerSec, runMsgsPerSec float64) {
	if probePerSec <= 0 {
		return
	}
	p.perSec = append(p.perSec, probePerSec)
	p.ratios = append(p.ratios, runMsgsPerSec/probePerSec)
}

// result is the report's Paired, nil without a pair.
func (p *pairProbe) result() *report.Paired {
	if p == nil || len(p.ratios) == 0 {
		return nil
	}
	return &report.Paired{Probe: fmt.Sprintf("group commit %s p%d × %d B", p.m, p.producers, p.rec),
		PerSec: ceiling.NewStat(p.perSec), Ratio: ceiling.NewStat(p.ratios)}
}

// pairDir is where a cell's paired probes write.
func pairDir(o Options, i int) string { return filepath.Join(o.Scratch, fmt.Sprintf("pair-%d", i)) }
