package report

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// The charts are plain SVG written here (no plotting dependency): a
// horizontal log-scale bar chart of throughput with each cell's ceiling
// marked, latency CDFs on a log time axis, and recovery time against store
// size.

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
	"#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"}

type svg struct {
	b    strings.Builder
	w, h int
}

func newSVG(w, h int) *svg {
	s := &svg{w: w, h: h}
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&s.b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	return s
}

func (s *svg) text(x, y float64, anchor, fill, txt string, extra ...string) {
	fmt.Fprintf(&s.b, `<text x="%.1f" y="%.1f" text-anchor="%s" fill="%s" %s>%s</text>`+"\n", x, y, anchor, fill, strings.Join(extra, " "), html.EscapeString(txt))
}

func (s *svg) line(x1, y1, x2, y2 float64, stroke string, width float64, extra ...string) {
	fmt.Fprintf(&s.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f" %s/>`+"\n", x1, y1, x2, y2, stroke, width, strings.Join(extra, " "))
}

func (s *svg) rect(x, y, w, h float64, fill string, extra ...string) {
	fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" %s/>`+"\n", x, y, max(w, 0), h, fill, strings.Join(extra, " "))
}

func (s *svg) polyline(pts [][2]float64, stroke string, extra ...string) {
	var b strings.Builder
	for _, p := range pts {
		fmt.Fprintf(&b, "%.1f,%.1f ", p[0], p[1])
	}
	fmt.Fprintf(&s.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6" %s/>`+"\n", strings.TrimSpace(b.String()), stroke, strings.Join(extra, " "))
}

func (s *svg) circle(x, y, r float64, fill string) {
	fmt.Fprintf(&s.b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>`+"\n", x, y, r, fill)
}

func (s *svg) finish(w io.Writer) error {
	s.b.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.b.String())
	return err
}

// logAxis maps [lo, hi] (decade-aligned, > 0) onto [p0, p1].
type logAxis struct{ lo, hi, p0, p1 float64 }

// positiveRange is the smallest and largest positive value of vals, or
// (deflo, defhi) when there is none.
func positiveRange(vals []float64, deflo, defhi float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return deflo, defhi
	}
	return lo, hi
}

func newLogAxis(vals []float64, p0, p1 float64) logAxis {
	lo, hi := positiveRange(vals, 1, 10)
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return logAxis{lo, hi, p0, p1}
}

func (a logAxis) at(v float64) float64 {
	v = min(max(v, a.lo), a.hi)
	return a.p0 + (math.Log10(v)-math.Log10(a.lo))/(math.Log10(a.hi)-math.Log10(a.lo))*(a.p1-a.p0)
}

func (a logAxis) ticks() []float64 {
	var t []float64
	for v := a.lo; v <= a.hi*1.0001; v *= 10 {
		t = append(t, v)
	}
	return t
}

func siLabel(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

func usLabel(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gs", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gms", v/1e3)
	}
	return fmt.Sprintf("%gµs", v)
}

func emptyChart(w io.Writer, msg string) error {
	s := newSVG(600, 60)
	s.text(300, 35, "middle", "#555", msg)
	return s.finish(w)
}

// ThroughputSVG draws msgs/s per cell (median bar, min–max whisker) and
// per peer, on a log scale, with each cell's ceiling as a red tick.
func (r *Results) ThroughputSVG(w io.Writer) error {
	type row struct {
		label       string
		med, lo, hi float64
		ceiling     float64
		peer        bool
	}
	var rows []row
	for _, c := range r.Cells {
		if c.Status == "ok" {
			rows = append(rows, row{c.Key(), c.MsgsPerSec, c.MsgsPerSecMin, c.MsgsPerSecMax, c.CeilingValue, false})
		}
	}
	for _, p := range r.Peers {
		if p.Status == "ok" {
			rows = append(rows, row{fmt.Sprintf("%s/%s/%dB/p%d", p.Name, p.Config, p.BodyBytes, p.Producers), p.MsgsPerSec, p.MsgsPerSecMin, p.MsgsPerSecMax, 0, true})
		}
	}
	if len(rows) == 0 {
		return emptyChart(w, "no throughput measured")
	}
	const labelW, plotW, rowH, top, bottom = 330.0, 560.0, 18.0, 46.0, 36.0
	width := int(labelW + plotW + 30)
	height := int(top + bottom + rowH*float64(len(rows)))
	s := newSVG(width, height)
	var vals []float64
	for _, rw := range rows {
		vals = append(vals, rw.med, rw.lo, rw.hi, rw.ceiling)
	}
	ax := newLogAxis(vals, labelW, labelW+plotW)
	s.text(float64(width)/2, 16, "middle", "#000", "Throughput, msgs/s (log scale): median bar, min–max whisker, red tick = disk ceiling for the cell", `font-weight="bold"`)
	s.rect(labelW, 26, 10, 10, palette[0])
	s.text(labelW+14, 35, "start", "#333", "keel cell")
	s.rect(labelW+90, 26, 10, 10, palette[1])
	s.text(labelW+104, 35, "start", "#333", "peer")
	s.line(labelW+150, 26, labelW+150, 37, "#d62728", 2.5)
	s.text(labelW+156, 35, "start", "#333", "ceiling (group commit at the same producer count, or sequential bandwidth)")
	plotBottom := top + rowH*float64(len(rows))
	for _, t := range ax.ticks() {
		x := ax.at(t)
		s.line(x, top-4, x, plotBottom, "#ddd", 1)
		s.text(x, plotBottom+14, "middle", "#333", siLabel(t))
	}
	for i, rw := range rows {
		y := top + rowH*float64(i)
		fill := palette[0]
		if rw.peer {
			fill = palette[1]
		}
		s.text(labelW-6, y+rowH*0.7, "end", "#000", rw.label)
		s.rect(labelW, y+3, ax.at(rw.med)-labelW, rowH-6, fill, `fill-opacity="0.85"`)
		s.line(ax.at(rw.lo), y+rowH/2, ax.at(rw.hi), y+rowH/2, "#000", 1)
		s.line(ax.at(rw.lo), y+5, ax.at(rw.lo), y+rowH-5, "#000", 1)
		s.line(ax.at(rw.hi), y+5, ax.at(rw.hi), y+rowH-5, "#000", 1)
		if rw.ceiling > 0 {
			x := ax.at(rw.ceiling)
			s.line(x, y+1, x, y+rowH-1, "#d62728", 2.5)
		}
	}
	s.line(labelW, plotBottom, labelW+plotW, plotBottom, "#000", 1)
	s.text(labelW+plotW/2, plotBottom+30, "middle", "#333", "acknowledged messages per second")
	return s.finish(w)
}

// LatencySVG draws the ack latency CDF of every produce-only cell and
// every peer on a log time axis.
func (r *Results) LatencySVG(w io.Writer) error {
	type series struct {
		label string
		cdf   []CDFPoint
		peer  bool
	}
	var ss []series
	for _, c := range r.Cells {
		if c.Status == "ok" && len(c.CDF) > 0 && c.Workload == "produce" {
			ss = append(ss, series{c.Key(), c.CDF, false})
		}
	}
	for _, p := range r.Peers {
		if p.Status == "ok" && len(p.CDF) > 0 {
			ss = append(ss, series{fmt.Sprintf("%s/%s/p%d", p.Name, p.Config, p.Producers), p.CDF, true})
		}
	}
	if len(ss) == 0 {
		return emptyChart(w, "no latency measured")
	}
	const left, plotW, plotH, top, legendW = 60.0, 560.0, 360.0, 40.0, 360.0
	legendH := 16.0*float64(len(ss)) + top
	height := int(max(top+plotH+50, legendH+20))
	width := int(left + plotW + legendW + 20)
	s := newSVG(width, height)
	var vals []float64
	for _, x := range ss {
		for _, p := range x.cdf {
			vals = append(vals, p.Us)
		}
	}
	ax := newLogAxis(vals, left, left+plotW)
	yAt := func(f float64) float64 { return top + plotH - f*plotH }
	s.text(left+plotW/2, 18, "middle", "#000", "Ack latency CDF (append/publish to ack, all runs); dashed = peers", `font-weight="bold"`)
	for _, t := range ax.ticks() {
		x := ax.at(t)
		s.line(x, top, x, top+plotH, "#ddd", 1)
		s.text(x, top+plotH+14, "middle", "#333", usLabel(t))
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
		y := yAt(f)
		s.line(left, y, left+plotW, y, "#eee", 1)
		s.text(left-4, y+4, "end", "#333", fmt.Sprintf("%g", f))
	}
	s.line(left, top+plotH, left+plotW, top+plotH, "#000", 1)
	s.line(left, top, left, top+plotH, "#000", 1)
	s.text(left+plotW/2, top+plotH+32, "middle", "#333", "latency (log scale)")
	for i, x := range ss {
		col := palette[i%len(palette)]
		var pts [][2]float64
		prev := 0.0
		for _, p := range x.cdf {
			px := ax.at(p.Us)
			pts = append(pts, [2]float64{px, yAt(prev)}, [2]float64{px, yAt(p.Fraction)})
			prev = p.Fraction
		}
		extra := ""
		if x.peer {
			extra = `stroke-dasharray="5,3"`
		}
		s.polyline(pts, col, extra)
		ly := top + 16*float64(i)
		s.line(left+plotW+14, ly-4, left+plotW+34, ly-4, col, 2, extra)
		s.text(left+plotW+40, ly, "start", "#000", x.label)
	}
	return s.finish(w)
}

// RecoverySVG draws time to ready (dashed, hollow markers) and to fully
// dispatched (solid, filled markers) against store size, both axes on a
// log scale, one colour per (crash kind, profile, body size) and one
// marker shape per body size.
func (r *Results) RecoverySVG(w io.Writer) error {
	type key struct {
		crash, profile string
		body           int
	}
	groups := map[key][]Recovery{}
	var keys []key
	var bodies []int
	for _, x := range r.Recovery {
		if x.Status != "ok" {
			continue
		}
		k := key{x.Crash, x.Profile, x.BodyBytes}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], x)
		if !slices.Contains(bodies, x.BodyBytes) {
			bodies = append(bodies, x.BodyBytes)
		}
	}
	if len(keys) == 0 {
		return emptyChart(w, "no recovery measured")
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(a.crash, b.crash), strings.Compare(a.profile, b.profile), cmp.Compare(a.body, b.body))
	})
	slices.Sort(bodies)
	const left, plotW, plotH, top, legendW, entryH = 70.0, 520.0, 340.0, 58.0, 270.0, 18.0
	width := int(left + plotW + legendW)
	height := int(max(top+plotH+56, top+entryH*float64(len(keys))+20))
	s := newSVG(width, height)
	var xs, ys []float64
	for _, g := range groups {
		for _, x := range g {
			xs = append(xs, float64(x.StoreBytes))
			ys = append(ys, x.ReadyMs, x.DispatchedMs)
		}
	}
	ax := newPow2Axis(xs, left, left+plotW)
	ay := newLogAxis(ys, top+plotH, top)
	s.text(float64(width)/2, 18, "middle", "#000", "Recovery time against store size (log–log)", `font-weight="bold"`)
	// Line-style and marker key.
	ky := 40.0
	s.line(left, ky-4, left+24, ky-4, "#333", 1.6)
	s.text(left+30, ky, "start", "#333", "fully dispatched")
	s.line(left+130, ky-4, left+154, ky-4, "#333", 1.6, `stroke-dasharray="5,3"`)
	s.text(left+160, ky, "start", "#333", "ready (core.Open)")
	mx := left + 290
	for i, b := range bodies {
		s.marker(i, mx, ky-4, "#333", true)
		s.text(mx+8, ky, "start", "#333", bodyStr(b)+" bodies")
		mx += 100
	}
	for _, t := range ax.ticks() {
		x := ax.at(t)
		s.line(x, top, x, top+plotH, "#ddd", 1)
		s.text(x, top+plotH+14, "middle", "#333", sizeLabel(t))
	}
	labelMinor := ay.hi/ay.lo <= 100.5 // two decades or fewer: label 2× and 5× too
	for _, t := range ay.minorTicks() {
		s.line(left, ay.at(t), left+plotW, ay.at(t), "#f2f2f2", 1)
		if labelMinor {
			s.text(left-4, ay.at(t)+4, "end", "#888", msLabel(t))
		}
	}
	for _, t := range ay.ticks() {
		y := ay.at(t)
		s.line(left, y, left+plotW, y, "#ddd", 1)
		s.text(left-4, y+4, "end", "#333", msLabel(t))
	}
	s.line(left, top+plotH, left+plotW, top+plotH, "#000", 1)
	s.line(left, top, left, top+plotH, "#000", 1)
	s.text(left+plotW/2, top+plotH+34, "middle", "#333", "commitlog size at the crash (log scale)")
	s.text(16, top+plotH/2, "middle", "#333", "time (log scale)", fmt.Sprintf(`transform="rotate(-90 16 %.1f)"`, top+plotH/2))
	for i, k := range keys {
		g := groups[k]
		slices.SortFunc(g, func(a, b Recovery) int { return cmp.Compare(a.StoreBytes, b.StoreBytes) })
		col := palette[i%len(palette)]
		shape := slices.Index(bodies, k.body)
		var ready, disp [][2]float64
		for _, x := range g {
			px := ax.at(float64(x.StoreBytes))
			ready = append(ready, [2]float64{px, ay.at(x.ReadyMs)})
			disp = append(disp, [2]float64{px, ay.at(x.DispatchedMs)})
		}
		s.polyline(disp, col)
		s.polyline(ready, col, `stroke-dasharray="5,3"`)
		for j := range g {
			s.marker(shape, disp[j][0], disp[j][1], col, true)
			s.marker(shape, ready[j][0], ready[j][1], col, false)
		}
		ly := top + entryH*float64(i) + 4
		s.line(left+plotW+14, ly-4, left+plotW+40, ly-4, col, 2)
		s.marker(shape, left+plotW+27, ly-4, col, true)
		s.text(left+plotW+46, ly, "start", "#000", fmt.Sprintf("%s / %s / %s", k.crash, k.profile, bodyStr(k.body)))
	}
	return s.finish(w)
}

// marker draws shape i (circle, square, triangle, diamond, repeating) at
// (x, y), filled or hollow.
func (s *svg) marker(i int, x, y float64, col string, filled bool) {
	fill, extra := col, ""
	if !filled {
		fill, extra = "white", fmt.Sprintf(`stroke="%s" stroke-width="1.3"`, col)
	}
	const r = 3.5
	switch i % 4 {
	case 0:
		fmt.Fprintf(&s.b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" %s/>`+"\n", x, y, r, fill, extra)
	case 1:
		fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" %s/>`+"\n", x-r, y-r, 2*r, 2*r, fill, extra)
	case 2:
		fmt.Fprintf(&s.b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" %s/>`+"\n", x, y-r-0.8, x+r+0.6, y+r, x-r-0.6, y+r, fill, extra)
	default:
		fmt.Fprintf(&s.b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" %s/>`+"\n", x, y-r-1, x+r+1, y, x, y+r+1, x-r-1, y, fill, extra)
	}
}

// minorTicks are 2× and 5× every decade inside the axis.
func (a logAxis) minorTicks() []float64 {
	var t []float64
	for v := a.lo; v < a.hi; v *= 10 {
		t = append(t, 2*v, 5*v)
	}
	return t
}

// pow2Axis is a log axis over byte counts with power-of-two bounds.
type pow2Axis struct{ logAxis }

func newPow2Axis(vals []float64, p0, p1 float64) pow2Axis {
	lo, hi := positiveRange(vals, 1<<20, 1<<30)
	lo = math.Exp2(math.Floor(math.Log2(lo)))
	hi = math.Exp2(math.Ceil(math.Log2(hi)))
	if hi <= lo {
		lo, hi = lo/2, lo*2
	}
	return pow2Axis{logAxis{lo, hi, p0, p1}}
}

// ticks are powers of two from lo to hi, at most 9 of them.
func (a pow2Axis) ticks() []float64 {
	n := math.Round(math.Log2(a.hi / a.lo))
	step := math.Exp2(math.Ceil(n / 8))
	var t []float64
	for v := a.lo; v <= a.hi*1.0001; v *= step {
		t = append(t, v)
	}
	return t
}

// sizeLabel is a power-of-two byte count as "64 MiB", "8 GiB".
func sizeLabel(v float64) string {
	for _, u := range []struct {
		suf string
		m   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.m {
			return fmt.Sprintf("%g %s", math.Round(v/u.m*100)/100, u.suf)
		}
	}
	return fmt.Sprintf("%g B", v)
}

// msLabel is a time in milliseconds as "500 ms", "2 s".
func msLabel(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%g s", v/1000)
	}
	return fmt.Sprintf("%g ms", v)
}
