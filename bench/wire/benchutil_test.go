package wire

import (
	"os"
	"slices"
	"strconv"
)

// benchRounds is KEEL_BENCH_ROUNDS, or 3: how many alternating rounds the
// paired benchmarks of this package run.
func benchRounds() int {
	if v, err := strconv.Atoi(os.Getenv("KEEL_BENCH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return 3
}

// median of v (v is not changed).
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
