package flushstrategies

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/metricset"
)

var bg = context.Background()

func TestCatalog(t *testing.T) {
	for _, name := range Names() {
		s, err := New(name)
		if err != nil {
			t.Fatalf("New(%q): %v", name, err)
		}
		s2, _ := New(name)
		if s == s2 {
			t.Fatalf("New(%q) returned the same value twice", name)
		}
		if _, ok := s.(sdk.StatusReporter); !ok {
			t.Errorf("%s: no StatusReporter", name)
		}
		if _, ok := s.(sdk.MetricsWriter); !ok {
			t.Errorf("%s: no MetricsWriter", name)
		}
	}
	if _, err := New("fsync-every-byte"); !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), "sync") {
		t.Fatalf("unknown name: %v", err)
	}
}

func TestAckPolicy(t *testing.T) {
	tests := []struct {
		name, body string
		want       sdk.FlushPolicy
	}{
		{NameSync, "", sdk.FlushPolicy{WaitFlush: true, Timeout: 5 * time.Second, VisibleAfterFlush: true}},
		{NameSync, `timeout = "750ms"`, sdk.FlushPolicy{WaitFlush: true, Timeout: 750 * time.Millisecond, VisibleAfterFlush: true}},
		{NameAsync, "", sdk.FlushPolicy{}},
		{NameBuffered, "", sdk.FlushPolicy{WriteBuffer: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/"+tc.body, func(t *testing.T) {
			if got := configured(t, tc.name, tc.body).AckPolicy(); got != tc.want {
				t.Fatalf("AckPolicy = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s, _ := New(name)
			if err := s.Stop(bg); err != nil {
				t.Fatalf("Stop before Start: %v", err)
			}
			s, _ = New(name)
			if err := s.Start(bg, nil); err == nil {
				t.Fatal("Start with a nil host succeeded")
			}
			h := newFakeHost()
			if err := s.Start(bg, h); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(bg, h); err == nil {
				t.Fatal("second Start succeeded")
			}
			if err := s.Configure(bg, sdk.Config{Section: "flush"}); err == nil {
				t.Fatal("Configure after Start succeeded")
			}
			h.add(100)
			if err := s.Stop(bg); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			// Stop flushed (and committed) everything.
			if w, c, f, _, _ := h.snapshot(); c != w || f != w {
				t.Fatalf("after Stop wrote %d committed %d flushed %d", w, c, f)
			}
			if err := s.Stop(bg); err != nil {
				t.Fatalf("second Stop: %v", err)
			}
			var st map[string]any
			b, err := s.(sdk.StatusReporter).Status(bg)
			if err != nil || json.Unmarshal(b, &st) != nil || st["running"] != false || st["strategy"] != name {
				t.Fatalf("status after stop: %s %v", b, err)
			}
		})
	}
}

// TestSyncGroupCommit: appends that arrive while an fdatasync runs are
// covered by exactly one more.
func TestSyncGroupCommit(t *testing.T) {
	for _, name := range []string{NameSync} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost()
			h.gate = make(chan struct{})
			h.entered = make(chan int64, 1)
			s := configured(t, name, "")
			if err := s.Start(bg, h); err != nil {
				t.Fatal(err)
			}
			defer s.Stop(bg)
			defer h.ungate()
			h.add(100)
			if got := <-h.entered; got != 100 {
				t.Fatalf("first flush target %d, want 100", got)
			}
			for i := 0; i < 10; i++ {
				h.add(10) // producers arriving during the fdatasync
			}
			h.gate <- struct{}{}
			if got := <-h.entered; got != 200 {
				t.Fatalf("second flush target %d, want 200 (all ten appends in one batch)", got)
			}
			h.gate <- struct{}{}
			eventually(t, 2*time.Second, "flushed 200", func() bool { _, _, f, _, _ := h.snapshot(); return f == 200 })
			time.Sleep(20 * time.Millisecond)
			if _, _, _, n, _ := h.snapshot(); n != 2 {
				t.Fatalf("%d flushes for two batches", n)
			}
		})
	}
}

func TestSyncIdleDoesNotFlush(t *testing.T) {
	h := newFakeHost()
	s := configured(t, NameSync, "")
	if err := s.Start(bg, h); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if _, _, _, n, _ := h.snapshot(); n != 0 {
		t.Fatalf("%d flushes with nothing appended", n)
	}
	if err := s.Stop(bg); err != nil {
		t.Fatal(err)
	}
}

// TestFlushErrorRetried: a failing flush is logged (once, not per retry)
// and counted, retried with back-off, and the strategy recovers.
func TestFlushErrorRetried(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{NameSync, ""},
		{NameAsync, `interval = "2ms"` + "\nleast_pages = 0\n"},
		{NameBuffered, `interval = "2ms"` + "\nleast_pages = 0\ncommit_interval = \"2ms\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost()
			h.setFlushErr(errDisk)
			s := configured(t, tc.name, tc.body)
			if err := s.Start(bg, h); err != nil {
				t.Fatal(err)
			}
			h.add(5000)
			eventually(t, 2*time.Second, "three failed flushes", func() bool { _, _, _, n, _ := h.snapshot(); return n >= 3 })
			if logs := h.logged(); len(logs) != 1 || !strings.Contains(logs[0], "input/output error") || !strings.HasPrefix(logs[0], "8 ") {
				t.Fatalf("logs: %q", logs)
			}
			h.setFlushErr(nil)
			eventually(t, 3*time.Second, "recovery", func() bool { _, _, f, _, _ := h.snapshot(); return f == 5000 })
			m, _ := s.(sdk.MetricsWriter).WriteMetrics(bg)
			if v := metricValue(t, m, `keel_flush_errors_total{strategy="`+tc.name+`"}`); v < 3 {
				t.Fatalf("errors_total %v", v)
			}
			if err := s.Stop(bg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStopLogsFinalFlushError: Stop's final flush is best effort: a
// failure is logged and counted, and Stop still returns nil with its
// goroutines gone.
func TestStopLogsFinalFlushError(t *testing.T) {
	h := newFakeHost()
	s := configured(t, NameAsync, `interval = "1h"`+"\n"+`thorough_interval = "1h"`)
	if err := s.Start(bg, h); err != nil {
		t.Fatal(err)
	}
	h.add(10)
	h.setFlushErr(errDisk)
	if err := s.Stop(bg); err != nil {
		t.Fatalf("Stop with a failing final flush: %v", err)
	}
	if logs := h.logged(); len(logs) != 1 || !strings.Contains(logs[0], "flush failed") || !strings.Contains(logs[0], "input/output error") {
		t.Fatalf("logs %q", logs)
	}
	if _, _, _, n, _ := h.snapshot(); n != 1 {
		t.Fatalf("%d flush calls, want the final one", n)
	}
}

// TestAsyncLeastPages: no flush below least_pages dirty pages, a flush at
// it, and the thorough interval flushes a single dirty byte.
func TestAsyncLeastPages(t *testing.T) {
	h := newFakeHost()
	s := configured(t, NameAsync, "interval = \"2ms\"\nleast_pages = 2\nthorough_interval = \"1h\"\n")
	if err := s.Start(bg, h); err != nil {
		t.Fatal(err)
	}
	h.add(2*PageSize - 1)
	time.Sleep(40 * time.Millisecond)
	if _, _, f, n, _ := h.snapshot(); n != 0 || f != 0 {
		t.Fatalf("flushed %d (%d calls) with less than least_pages dirty", f, n)
	}
	h.add(1)
	eventually(t, 2*time.Second, "flush at least_pages", func() bool { _, _, f, _, _ := h.snapshot(); return f == 2*PageSize })
	h.add(1)
	time.Sleep(40 * time.Millisecond)
	if _, _, f, _, _ := h.snapshot(); f != 2*PageSize {
		t.Fatalf("flushed one dirty byte before the thorough interval")
	}
	if err := s.Stop(bg); err != nil {
		t.Fatal(err)
	}

	h = newFakeHost()
	s = configured(t, NameAsync, "interval = \"2ms\"\nleast_pages = 1000\nthorough_interval = \"20ms\"\n")
	if err := s.Start(bg, h); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(bg)
	h.add(1)
	eventually(t, 2*time.Second, "thorough flush", func() bool { _, _, f, _, _ := h.snapshot(); return f == 1 })
}

// TestAsyncCadence: the flush cadence is the interval, whatever the load.
func TestAsyncCadence(t *testing.T) {
	h := newFakeHost()
	s := configured(t, NameAsync, "interval = \"10ms\"\nleast_pages = 0\n")
	if err := s.Start(bg, h); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				h.add(100)
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	_, _, _, n, _ := h.snapshot()
	if n < 3 || n > 21 { // 20 ticks; a loaded machine may drop a few
		t.Fatalf("%d flushes in 200ms at a 10ms interval", n)
	}
	if err := s.Stop(bg); err != nil {
		t.Fatal(err)
	}
}

// TestBufferedCommitsThenFlushes: on a write-buffered host, nothing is
// committed until a commit round, flushes follow, and Stop commits before
// its final flush.
func TestBufferedCommitsThenFlushes(t *testing.T) {
	h := newFakeHost()
	h.buffered = true
	s := configured(t, NameBuffered, "commit_interval = \"5ms\"\ninterval = \"5ms\"\nleast_pages = 0\n")
	if err := s.Start(bg, h); err != nil {
		t.Fatal(err)
	}
	h.add(300)
	eventually(t, 2*time.Second, "commit and flush", func() bool { w, c, f, _, _ := h.snapshot(); return c == w && f == w })
	if err := s.Stop(bg); err != nil {
		t.Fatal(err)
	}

	h = newFakeHost()
	h.buffered = true
	s = configured(t, NameBuffered, "commit_interval = \"1h\"\ninterval = \"1h\"\nthorough_interval = \"1h\"\n")
	if err := s.Start(bg, h); err != nil {
		t.Fatal(err)
	}
	h.add(300)
	time.Sleep(10 * time.Millisecond)
	if _, c, _, _, commits := h.snapshot(); c != 0 || commits != 0 {
		t.Fatalf("committed %d (%d commits) before the commit interval", c, commits)
	}
	if err := s.Stop(bg); err != nil {
		t.Fatal(err)
	}
	if w, c, f, _, _ := h.snapshot(); c != w || f != w {
		t.Fatalf("after Stop wrote %d committed %d flushed %d", w, c, f)
	}
	h.mu.Lock()
	order := strings.Join(h.order, ",")
	h.mu.Unlock()
	if order != "commit,flush" {
		t.Fatalf("Stop called %s, want commit,flush", order)
	}
}

// TestMetricsAndStatus checks the Prometheus text and the status JSON.
func TestMetricsAndStatus(t *testing.T) {
	h := newFakeHost()
	s := configured(t, NameSync, "")
	if err := s.Start(bg, h); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		h.add(1000)
		want := int64(1000 * (i + 1))
		eventually(t, 2*time.Second, "flush", func() bool { _, _, f, _, _ := h.snapshot(); return f == want })
	}
	m, err := s.(sdk.MetricsWriter).WriteMetrics(bg)
	if err != nil {
		t.Fatal(err)
	}
	flushes := metricValue(t, m, `keel_flush_flushes_total{strategy="sync"}`)
	if flushes < 1 || flushes > 5 {
		t.Fatalf("flushes_total %v", flushes)
	}
	if v := metricValue(t, m, `keel_flush_flushed_bytes_total{strategy="sync"}`); v != 5000 {
		t.Fatalf("flushed_bytes_total %v", v)
	}
	if v := metricValue(t, m, `keel_flush_latency_seconds_count{strategy="sync"}`); v != flushes {
		t.Fatalf("latency count %v, flushes %v", v, flushes)
	}
	if v := metricValue(t, m, `keel_flush_batch_bytes_bucket{strategy="sync",le="+Inf"}`); v != flushes {
		t.Fatalf("batch +Inf bucket %v", v)
	}
	if v := metricValue(t, m, `keel_flush_batch_bytes_sum{strategy="sync"}`); v != 5000 {
		t.Fatalf("batch sum %v", v)
	}
	checkExposition(t, m)
	var st struct {
		Strategy string `json:"strategy"`
		Running  bool   `json:"running"`
		Flushes  int    `json:"flushes"`
		Flushed  int64  `json:"flushed_offset"`
		Config   struct {
			Timeout string `json:"timeout"`
		} `json:"config"`
		Policy struct {
			WaitFlush bool   `json:"wait_flush"`
			Timeout   string `json:"timeout"`
		} `json:"ack_policy"`
	}
	b, err := s.(sdk.StatusReporter).Status(bg)
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("status %s: %v", b, err)
	}
	if st.Strategy != "sync" || !st.Running || st.Flushes != int(flushes) || st.Flushed != 5000 ||
		st.Config.Timeout != "5s" || !st.Policy.WaitFlush || st.Policy.Timeout != "5s" {
		t.Fatalf("status %s", b)
	}
	if err := s.Stop(bg); err != nil {
		t.Fatal(err)
	}
}

// metricValue returns the value of the sample named exactly series.
func metricValue(t *testing.T, text []byte, series string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return v
		}
	}
	t.Fatalf("no sample %s in\n%s", series, text)
	return 0
}

// checkExposition checks every line is a comment or "name{labels} value",
// every metric has HELP and TYPE, and histogram buckets are cumulative.
func checkExposition(t *testing.T, text []byte) {
	t.Helper()
	typed := map[string]bool{}
	last := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" {
			if f[1] == "TYPE" {
				typed[f[2]] = true
			}
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			t.Fatalf("bad sample line %q", line)
		}
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			t.Fatalf("bad sample line %q", line)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("bad value in %q", line)
		}
		base := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && typed[b] {
				base = b
			}
		}
		if !typed[base] {
			t.Fatalf("sample %q without TYPE", line)
		}
		if strings.HasSuffix(name, "_bucket") {
			key := name + strings.Split(labels, ",le=")[0]
			if v < last[key] {
				t.Fatalf("bucket not cumulative at %q", line)
			}
			last[key] = v
		}
	}
}

// TestHistogramProperties: buckets stay cumulative, count and sum match
// the observations, and quantiles are bucket bounds at or above the true
// quantile.
func TestHistogramProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		set := metricset.New()
		h := set.Histogram(`x{a="b"}`, "help", latencyBounds)
		vs := rapid.SliceOfN(rapid.Float64Range(0, 10), 1, 200).Draw(t, "v")
		sum := 0.0
		for _, v := range vs {
			h.Update(v)
			sum += v
		}
		out := string(set.Bytes())
		if !strings.Contains(out, `x_count{a="b"} `+strconv.Itoa(len(vs))) ||
			!strings.Contains(out, `x_bucket{a="b",le="+Inf"} `+strconv.Itoa(len(vs))) {
			t.Fatalf("count missing:\n%s", out)
		}
		sorted := append([]float64(nil), vs...)
		sortFloats(sorted)
		for _, q := range []float64{0.5, 0.99} {
			got := parseBuckets([]byte(out), "x").quantile(q)
			rank := int(q*float64(len(vs))+0.5) - 1
			rank = max(0, min(rank, len(vs)-1))
			trueQ := sorted[rank]
			if trueQ <= latencyBounds[len(latencyBounds)-1] && got < trueQ {
				t.Fatalf("q%v = %v below the true %v", q, got, trueQ)
			}
		}
	})
}

func sortFloats(a []float64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// TestSyncProperty: for any schedule of concurrent appends, every append
// is eventually flushed, flushes never outnumber appends, and the flushed
// offset never moves backwards.
func TestSyncProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newFakeHost()
		s := configured(t, NameSync, "")
		if err := s.Start(bg, h); err != nil {
			rt.Fatal(err)
		}
		producers := rapid.IntRange(1, 8).Draw(rt, "producers")
		per := rapid.IntRange(1, 30).Draw(rt, "per")
		sizes := rapid.SliceOfN(rapid.Int64Range(1, 5000), producers*per, producers*per).Draw(rt, "sizes")
		var wg sync.WaitGroup
		errs := make(chan string, producers)
		for p := 0; p < producers; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					h.add(sizes[p*per+i])
					h.mu.Lock()
					end := h.wrote
					h.mu.Unlock()
					deadline := time.Now().Add(5 * time.Second)
					for {
						if _, _, f, _, _ := h.snapshot(); f >= end {
							break
						}
						if time.Now().After(deadline) {
							errs <- "append never flushed"
							return
						}
						time.Sleep(20 * time.Microsecond)
					}
				}
			}(p)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			rt.Fatal(e)
		}
		if err := s.Stop(bg); err != nil {
			rt.Fatal(err)
		}
		w, c, f, n, _ := h.snapshot()
		if f != w || c != w || n > producers*per+1 {
			rt.Fatalf("wrote %d flushed %d after %d flushes for %d appends", w, f, n, producers*per)
		}
	})
}

// flushAfterHost adds sdk.FlushAfterer to fakeHost: WaitCommitted then
// Flush in one call, or ErrNotSupported like a host that predates it.
type flushAfterHost struct {
	*fakeHost
	unsupported bool
	calls       atomic.Int32
}

func (h *flushAfterHost) FlushAfter(ctx context.Context, after int64) (int64, error) {
	h.calls.Add(1)
	if h.unsupported {
		return 0, fmt.Errorf("host: %w", sdk.ErrNotSupported)
	}
	return sdk.WaitThenFlush(ctx, h, after)
}

// TestSyncFlushAfter: the sync strategy runs its rounds through
// FlushAfter when the host has it, and falls back to WaitCommitted and
// Flush, asking once, when the host answers ErrNotSupported.
func TestSyncFlushAfter(t *testing.T) {
	for _, unsupported := range []bool{false, true} {
		t.Run(fmt.Sprint("unsupported=", unsupported), func(t *testing.T) {
			h := &flushAfterHost{fakeHost: newFakeHost(), unsupported: unsupported}
			s := configured(t, NameSync, "")
			if err := s.Start(bg, h); err != nil {
				t.Fatal(err)
			}
			defer s.Stop(bg)
			for i := 1; i <= 5; i++ {
				h.add(10)
				eventually(t, 2*time.Second, "flushed", func() bool { _, _, f, _, _ := h.snapshot(); return f == int64(10*i) })
			}
			if got := h.calls.Load(); unsupported && got != 1 {
				t.Fatalf("FlushAfter called %d times after ErrNotSupported, want once", got)
			} else if !unsupported && got < 5 {
				t.Fatalf("FlushAfter called %d times for 5 rounds", got)
			}
		})
	}
}
