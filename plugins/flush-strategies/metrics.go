package flushstrategies

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/keelmq/keel/sdk/metricset"
)

// latencyBounds are flush latency buckets in seconds: 50 µs to 5 s.
var latencyBounds = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
}

// bytesBounds are bytes-per-flush buckets: 256 B to 64 MiB.
var bytesBounds = []float64{
	256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20,
}

// latencyName is the flush latency histogram, which Status also reads.
const latencyName = "keel_flush_latency_seconds"

// metrics are one strategy's series, each labelled strategy="<name>". Status
// reads the same counters.
type metrics struct {
	set          *metricset.Set
	flushes      *vm.Counter
	commits      *vm.Counter
	errors       *vm.Counter
	flushedBytes *vm.Counter
	latency      *vm.PrometheusHistogram
	batch        *vm.PrometheusHistogram
}

// newMetrics registers the series of strategy name; flushedAt is the
// flushed offset the strategy last saw.
func newMetrics(name string, flushedAt *atomic.Int64) metrics {
	s := metricset.New()
	series := func(family string) string { return fmt.Sprintf("%s{strategy=%q}", family, name) }
	s.Gauge(series("keel_flush_flushed_offset"), "Flushed offset last seen by the strategy.",
		func() float64 { return float64(flushedAt.Load()) })
	return metrics{
		set:          s,
		flushes:      s.Counter(series("keel_flush_flushes_total"), "Flushes (fdatasync rounds) that made new bytes durable."),
		commits:      s.Counter(series("keel_flush_commits_total"), "Commits that moved write-buffered bytes into the log files."),
		errors:       s.Counter(series("keel_flush_errors_total"), "Failed Flush, Commit or WaitCommitted calls."),
		flushedBytes: s.Counter(series("keel_flush_flushed_bytes_total"), "Bytes made durable by this strategy's flushes."),
		latency:      s.Histogram(series(latencyName), "Duration of Host.Flush calls that made new bytes durable.", latencyBounds),
		batch:        s.Histogram(series("keel_flush_batch_bytes"), "Bytes made durable per flush.", bytesBounds),
	}
}

// WriteMetrics implements sdk.MetricsWriter for every strategy.
func (m *metrics) WriteMetrics(ctx context.Context) ([]byte, error) {
	return m.set.Bytes(), nil
}

// latencyBuckets reads the flush latency histogram as its exposition shows it.
func (m *metrics) latencyBuckets() buckets {
	return parseBuckets(m.set.Bytes(), latencyName)
}

// buckets are one histogram's cumulative counts: counts[i] observations at
// or below bounds[i], then the +Inf bucket (the total) last.
type buckets struct {
	bounds []float64
	counts []uint64
}

// parseBuckets reads the `le` buckets of histogram family name from
// Prometheus text (in the order written, which is ascending).
func parseBuckets(text []byte, name string) buckets {
	var b buckets
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+"_bucket{")
		if !ok {
			continue
		}
		_, rest, _ = strings.Cut(rest, `le="`)
		le, val, _ := strings.Cut(rest, `"} `)
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			continue
		}
		if le != "+Inf" {
			ub, err := strconv.ParseFloat(le, 64)
			if err != nil {
				continue
			}
			b.bounds = append(b.bounds, ub)
		}
		b.counts = append(b.counts, n)
	}
	return b
}

// quantile estimates the q-quantile (0 < q <= 1) as the upper bound of the
// bucket holding it; observations above the last bound report the last
// bound. 0 when empty.
func (b buckets) quantile(q float64) float64 {
	if len(b.counts) == 0 || len(b.bounds) == 0 {
		return 0
	}
	n := b.counts[len(b.counts)-1]
	if n == 0 {
		return 0
	}
	rank := max(uint64(q*float64(n)+0.5), 1)
	for i, c := range b.counts {
		if c >= rank && i < len(b.bounds) {
			return b.bounds[i]
		}
	}
	return b.bounds[len(b.bounds)-1]
}
