package hist

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestBucketBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Int64Range(0, math.MaxInt64).Draw(t, "v")
		i := index(v)
		if i < 0 || i >= len(Histogram{}.counts) {
			t.Fatalf("index(%d) = %d out of range", v, i)
		}
		lo, hi := lowest(i), highest(i)
		if v < lo || v > hi {
			t.Fatalf("v=%d in bucket %d [%d,%d]", v, i, lo, hi)
		}
		if lo > 0 && float64(hi-lo) > float64(lo)/subCount {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d of its value", i, lo, hi, subCount)
		}
	})
}

func TestExactBelowSubCount(t *testing.T) {
	var h Histogram
	for v := int64(0); v < 2*subCount; v++ {
		h.Record(v)
	}
	for v := int64(0); v < 2*subCount; v++ {
		q := float64(v+1) / float64(2*subCount)
		if got := h.Quantile(q); got != v {
			t.Fatalf("Quantile(%v) = %d, want %d", q, got, v)
		}
	}
}

func TestQuantileAgainstSorted(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vals := rapid.SliceOfN(rapid.Int64Range(0, 1<<40), 1, 500).Draw(t, "vals")
		q := rapid.Float64Range(0, 1).Draw(t, "q")
		var h Histogram
		for _, v := range vals {
			h.Record(v)
		}
		s := slices.Clone(vals)
		slices.Sort(s)
		rank := int(math.Ceil(q * float64(len(s))))
		if rank < 1 {
			rank = 1
		}
		want := s[rank-1]
		if q == 0 {
			want = s[0]
		}
		got := h.Quantile(q)
		if got < want || float64(got) > float64(want)*(1+1.0/subCount)+1 {
			t.Fatalf("Quantile(%v) = %d, exact %d", q, got, want)
		}
		if h.Min() != s[0] || h.Max() != s[len(s)-1] || h.Count() != uint64(len(s)) {
			t.Fatalf("min/max/count %d/%d/%d, want %d/%d/%d", h.Min(), h.Max(), h.Count(), s[0], s[len(s)-1], len(s))
		}
	})
}

func TestMergeEqualsRecordAll(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.SliceOf(rapid.Int64Range(0, 1<<50)).Draw(t, "a")
		b := rapid.SliceOf(rapid.Int64Range(0, 1<<50)).Draw(t, "b")
		var ha, hb, all Histogram
		for _, v := range a {
			ha.Record(v)
			all.Record(v)
		}
		for _, v := range b {
			hb.Record(v)
			all.Record(v)
		}
		ha.Merge(&hb)
		if ha != all {
			t.Fatalf("merge differs from recording everything in one histogram")
		}
	})
}

func TestCDFAndEmpty(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.CDF() != nil || h.Mean() != 0 {
		t.Fatal("empty histogram should report zeros")
	}
	for _, v := range []int64{1000, 2000, 3000, 1_000_000, -5} {
		h.Record(v)
	}
	if h.Min() != 0 {
		t.Fatalf("negative value should record as 0, min=%d", h.Min())
	}
	cdf := h.CDF()
	if len(cdf) != 5 || cdf[len(cdf)-1].Fraction != 1 || cdf[len(cdf)-1].Value != 1_000_000 {
		t.Fatalf("cdf = %+v", cdf)
	}
	for i := 1; i < len(cdf); i++ {
		if cdf[i].Value <= cdf[i-1].Value || cdf[i].Fraction <= cdf[i-1].Fraction {
			t.Fatalf("cdf not increasing: %+v", cdf)
		}
	}
	if got := h.Quantile(0.999); got != 1_000_000 {
		t.Fatalf("p99.9 = %d", got)
	}
	if got := h.Quantile(0.5); got < 2000 || got > 2000+2000/subCount {
		t.Fatalf("p50 = %d", got)
	}
	h.Reset()
	if h.Count() != 0 {
		t.Fatal("reset")
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	for i := 0; i < b.N; i++ {
		h.Record(int64(i) * 7919)
	}
}
