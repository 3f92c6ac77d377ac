// Package metricset is a plugin's own metric set for sdk.MetricsWriter:
// a github.com/VictoriaMetrics/metrics Set (one per plugin instance, never
// the process-wide default set) whose Prometheus text carries a "# HELP"
// and a "# TYPE" line before each metric family.
//
// The library writes that metadata only when the process-wide
// metrics.ExposeMetadata switch is on, and a builtin plugin shares its
// process with the host, so the switch is not the plugin's to turn; Set
// writes the metadata itself from what each constructor was told, and drops
// any the library wrote.
package metricset

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"

	vm "github.com/VictoriaMetrics/metrics"
)

// Set is a metric set whose exposition is typed and documented. Its methods
// are safe for concurrent use. A name is a metric name with optional labels
// (`foo`, `foo{a="b"}`); every series of one family must be given the same
// help and type.
type Set struct {
	set *vm.Set

	mu   sync.Mutex
	meta map[string]family // by family name
}

type family struct{ typ, help string }

// New returns an empty Set.
func New() *Set {
	return &Set{set: vm.NewSet(), meta: map[string]family{}}
}

// Counter registers a counter the caller increments.
func (s *Set) Counter(name, help string) *vm.Counter {
	s.describe(name, "counter", help)
	return s.set.NewCounter(name)
}

// CounterFunc registers a counter whose value f returns at scrape time, for
// a count kept elsewhere (f must never go backwards and must be safe for
// concurrent calls).
func (s *Set) CounterFunc(name, help string, f func() float64) {
	s.describe(name, "counter", help)
	s.set.NewGauge(name, f)
}

// Gauge registers a gauge whose value f returns at scrape time (f must be
// safe for concurrent calls).
func (s *Set) Gauge(name, help string, f func() float64) {
	s.describe(name, "gauge", help)
	s.set.NewGauge(name, f)
}

// Histogram registers a Prometheus histogram (cumulative `le` buckets with
// the given ascending upper bounds, then +Inf, _sum and _count).
func (s *Set) Histogram(name, help string, upperBounds []float64) *vm.PrometheusHistogram {
	s.describe(name, "histogram", help)
	return s.set.NewPrometheusHistogramExt(name, upperBounds)
}

// Writer registers write, called at every scrape after the registered
// series, for series whose label values come and go (one per replica, say).
// It writes samples only (metrics.WriteGaugeUint64 and its siblings); each
// family it writes must be declared with Describe.
func (s *Set) Writer(write func(w io.Writer)) {
	s.set.RegisterMetricsWriter(write)
}

// Describe declares the type ("counter", "gauge", "histogram") and help of
// a family a Writer writes.
func (s *Set) Describe(family, typ, help string) {
	s.describe(family, typ, help)
}

func (s *Set) describe(name, typ, help string) {
	fam, _, _ := strings.Cut(name, "{")
	s.mu.Lock()
	s.meta[fam] = family{typ: typ, help: help}
	s.mu.Unlock()
}

// WritePrometheus writes every series in Prometheus text format, each
// family's first sample preceded by its HELP and TYPE lines.
func (s *Set) WritePrometheus(w io.Writer) {
	var raw bytes.Buffer
	s.set.WritePrometheus(&raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	written := map[string]bool{}
	for line := range strings.Lines(raw.String()) {
		if strings.HasPrefix(line, "#") {
			continue // the library's own metadata, when the process turned it on
		}
		if fam, f, ok := s.familyOf(line); ok && !written[fam] {
			written[fam] = true
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", fam, f.help, fam, f.typ)
		}
		io.WriteString(w, line)
	}
}

// Bytes is WritePrometheus into a new slice, as sdk.MetricsWriter returns.
func (s *Set) Bytes() []byte {
	var b bytes.Buffer
	s.WritePrometheus(&b)
	return b.Bytes()
}

// familyOf names the family of a sample line: its metric name, or for a
// histogram's _bucket, _sum and _count series the histogram's name. Caller
// holds s.mu.
func (s *Set) familyOf(line string) (string, family, bool) {
	name := line
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		name = line[:i]
	}
	if f, ok := s.meta[name]; ok {
		return name, f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := s.meta[base]; ok && f.typ == "histogram" {
				return base, f, true
			}
		}
	}
	return "", family{}, false
}
