package flushstrategies

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// histogram is a fixed-bucket Prometheus histogram. Observations are rare
// (one per flush), so a mutex is cheap enough.
type histogram struct {
	mu     sync.Mutex
	bounds []float64 // upper bounds, ascending
	counts []uint64  // per bucket (not cumulative); last is +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.n++
	h.mu.Unlock()
}

// quantile estimates the q-quantile (0 < q <= 1) as the upper bound of the
// bucket holding it; +Inf observations report the largest bound. 0 when
// empty.
func (h *histogram) quantile(q float64) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var acc uint64
	for i, c := range h.counts {
		acc += c
		if acc >= rank {
			if i < len(h.bounds) {
				return h.bounds[i]
			}
			break
		}
	}
	return h.bounds[len(h.bounds)-1]
}

// write appends the Prometheus text exposition of h as name with labels
// (already formatted, e.g. `strategy="sync"`).
func (h *histogram) write(b *strings.Builder, name, help, labels string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var acc uint64
	for i, ub := range h.bounds {
		acc += h.counts[i]
		fmt.Fprintf(b, "%s_bucket{%s,le=%q} %d\n", name, labels, strconv.FormatFloat(ub, 'g', -1, 64), acc)
	}
	acc += h.counts[len(h.bounds)]
	fmt.Fprintf(b, "%s_bucket{%s,le=\"+Inf\"} %d\n", name, labels, acc)
	fmt.Fprintf(b, "%s_sum{%s} %s\n", name, labels, strconv.FormatFloat(h.sum, 'g', -1, 64))
	fmt.Fprintf(b, "%s_count{%s} %d\n", name, labels, h.n)
}

// latencyBounds are flush latency buckets in seconds: 50 µs to 5 s.
var latencyBounds = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
}

// bytesBounds are bytes-per-flush buckets: 256 B to 64 MiB.
var bytesBounds = []float64{
	256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20,
}
