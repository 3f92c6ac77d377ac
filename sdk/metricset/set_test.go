package metricset

import (
	"fmt"
	"io"
	"strings"
	"testing"

	vm "github.com/VictoriaMetrics/metrics"
)

// TestExpositionTyped: every family gets one HELP and one TYPE line before
// its first sample, histogram series included, whatever the process-wide
// metadata switch says.
func TestExpositionTyped(t *testing.T) {
	for _, global := range []bool{false, true} {
		t.Run(fmt.Sprint("ExposeMetadata=", global), func(t *testing.T) {
			vm.ExposeMetadata(global)
			defer vm.ExposeMetadata(false)
			s := New()
			c := s.Counter(`x_total{a="b"}`, "Things.")
			c.Add(3)
			s.Counter(`x_total{a="c"}`, "Things.").Inc()
			s.Gauge("y", "Level.", func() float64 { return 1234567890 })
			s.CounterFunc("z_total", "Kept elsewhere.", func() float64 { return 7 })
			s.Histogram(`h{a="b"}`, "Sizes.", []float64{1, 10}).Update(5)
			s.Describe("w", "gauge", "Dynamic.")
			s.Writer(func(w io.Writer) { vm.WriteGaugeUint64(w, `w{r="1"}`, 9) })
			got := string(s.Bytes())
			want := `# HELP h Sizes.
# TYPE h histogram
h_bucket{a="b",le="1"} 0
h_bucket{a="b",le="10"} 1
h_bucket{a="b",le="+Inf"} 1
h_sum{a="b"} 5
h_count{a="b"} 1
# HELP x_total Things.
# TYPE x_total counter
x_total{a="b"} 3
x_total{a="c"} 1
# HELP y Level.
# TYPE y gauge
y 1234567890
# HELP z_total Kept elsewhere.
# TYPE z_total counter
z_total 7
# HELP w Dynamic.
# TYPE w gauge
w{r="1"} 9
`
			if got != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
			if strings.Count(got, "# TYPE") != 5 {
				t.Fatalf("metadata repeated:\n%s", got)
			}
		})
	}
}
