// Package hist is a small HDR-style log-linear histogram of durations (or
// any non-negative integer values), for benchmark latencies.
//
// Values are bucketed by their power of two (the "magnitude") and, within
// it, linearly into 2^SubBits sub-buckets, so every recorded value is
// reported with a relative error below 2^-SubBits (under 0.8 % with the
// default 7 bits), whatever its size, in a fixed 64×128 array of counters.
// This is the layout of Gil Tene's HdrHistogram with the precision fixed at
// about two significant decimal digits.
//
// A Histogram is not safe for concurrent use: give each goroutine its own
// and Merge them afterwards.
package hist

import (
	"math"
	"math/bits"
)

// SubBits is the number of linear sub-bucket bits per power of two.
const SubBits = 7

const (
	subCount = 1 << SubBits
	// blocks: block 0 holds the exact values below subCount; block b >= 1
	// holds values whose highest set bit is SubBits+b-1 (up to bit 62).
	magCount = 64 - SubBits
)

// Histogram counts non-negative int64 values. The zero value is ready to
// use.
type Histogram struct {
	counts [magCount * subCount]uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

// index returns the bucket of v (v >= 0). Values below subCount have a
// bucket each (block 0); a value whose highest set bit is h >= SubBits lies
// in block h-SubBits+1, which splits [2^h, 2^(h+1)) into subCount buckets
// of width 2^(h-SubBits).
func index(v int64) int {
	u := uint64(v)
	if u < subCount {
		return int(u)
	}
	mag := bits.Len64(u) - 1 - SubBits // width of the buckets is 2^mag
	sub := int(u>>uint(mag)) - subCount
	return (mag+1)*subCount + sub
}

// lowest returns the smallest value that falls in bucket i.
func lowest(i int) int64 {
	blk, sub := i/subCount, i%subCount
	if blk == 0 {
		return int64(sub)
	}
	return int64(uint64(subCount+sub) << uint(blk-1))
}

// highest returns the largest value that falls in bucket i.
func highest(i int) int64 {
	blk := i / subCount
	if blk == 0 {
		return lowest(i)
	}
	return lowest(i) + int64(uint64(1)<<uint(blk-1)) - 1
}

// Record adds one value. Negative values are recorded as 0.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.counts[index(v)]++
	h.n++
	h.sum += float64(v)
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
}

// Reset forgets every value.
func (h *Histogram) Reset() { *h = Histogram{} }

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() int64 { return h.min }

// Max is the exact largest value recorded (0 when empty).
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact arithmetic mean (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns the value at quantile q in [0, 1]: the highest value
// of the bucket holding the ceil(q·n)-th smallest value, clamped to
// [Min, Max]. It is within 2^-SubBits (relative) of the true quantile and
// never below it. Quantile(0) is Min and Quantile(1) is Max; an empty
// histogram gives 0.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(max(highest(i), h.min), h.max)
		}
	}
	return h.max
}

// Point is one step of a cumulative distribution: Fraction of the values
// are <= Value.
type Point struct {
	Value    int64
	Fraction float64
}

// CDF returns the cumulative distribution, one point per non-empty bucket
// (the bucket's highest value, clamped to Max), in increasing order. The
// last point has Fraction 1.
func (h *Histogram) CDF() []Point {
	if h.n == 0 {
		return nil
	}
	var out []Point
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		out = append(out, Point{Value: min(max(highest(i), h.min), h.max), Fraction: float64(seen) / float64(h.n)})
	}
	return out
}
