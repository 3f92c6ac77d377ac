package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/keelmq/keel/bench/matrix"
)

// Files written by WriteAll into the output directory.
const (
	FileJSON       = "results.json"
	FileCSV        = "results.csv"
	FileMarkdown   = "report.md"
	FileThroughput = "throughput.svg"
	FileLatency    = "latency-cdf.svg"
	FileRecovery   = "recovery.svg"
)

// WriteAll writes results.json, results.csv, report.md and the charts
// into dir (created if needed).
func (r *Results) WriteAll(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	write := func(name string, f func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		if err := f(fh); err != nil {
			fh.Close()
			return fmt.Errorf("write %s: %w", p, err)
		}
		return fh.Close()
	}
	for _, f := range []struct {
		name string
		fn   func(io.Writer) error
	}{
		{FileJSON, r.WriteJSON},
		{FileCSV, r.WriteCSV},
		{FileThroughput, r.ThroughputSVG},
		{FileLatency, r.LatencySVG},
		{FileRecovery, r.RecoverySVG},
		{FileMarkdown, func(w io.Writer) error { return r.WriteMarkdown(w, "") }},
	} {
		if err := write(f.name, f.fn); err != nil {
			return err
		}
	}
	return nil
}

// CSVHeader is the first row of results.csv: one row per cell.
var CSVHeader = []string{"workload", "flush", "replication", "index", "mode", "body_bytes", "producers", "status",
	"msgs_per_sec", "msgs_per_sec_min", "msgs_per_sec_max", "mb_per_sec", "p50_us", "p99_us", "p999_us",
	"cpu_sec_per_million", "fsyncs_per_sec", "repl_lag_max_bytes", "consume_msgs_per_sec", "e2e_p99_us",
	"ceiling_ratio", "ceiling", "paired_ratio", "paired_ratio_min", "paired_ratio_max", "impl", "note"}

func f(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// WriteCSV writes one row per cell.
func (r *Results) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(CSVHeader)
	for _, c := range r.Cells {
		cw.Write([]string{c.Workload, c.Flush, c.Replication, c.Index, c.Mode, strconv.Itoa(c.BodyBytes), strconv.Itoa(c.Producers),
			c.Status, f(c.MsgsPerSec), f(c.MsgsPerSecMin), f(c.MsgsPerSecMax), f(c.MBPerSec), f(c.P50us), f(c.P99us), f(c.P999us),
			f(c.CPUSecPerMillion), f(c.FsyncsPerSec), strconv.FormatInt(c.ReplLagMaxBytes, 10), f(c.ConsumeMsgsPerSec), f(c.EndToEndP99us),
			f(c.CeilingRatio), c.Ceiling, f(c.Paired.ratio().Median), f(c.Paired.ratio().Min), f(c.Paired.ratio().Max), c.Impl, c.Note})
	}
	cw.Flush()
	return cw.Error()
}

// human formats a rate with a k/M suffix.
func human(v float64) string {
	switch {
	case v >= 10e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 10e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// us formats microseconds.
func us(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fs", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2fms", v/1e3)
	}
	return fmt.Sprintf("%.0fµs", v)
}

func sizeStr(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// whatRan is one line per distinct plugin combination of cells:
// "`sync+echo+none (builtin)`: flush=sync (builtin) replication=echo (path
// bin/replication-echo) {wait_replicas=1}".
func whatRan(cells []Cell) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cells {
		if len(c.Plugins) == 0 {
			continue // a results file from before cells carried them
		}
		combo := matrix.Cell{Flush: c.Flush, Replication: c.Replication, Index: c.Index, Mode: c.Mode}.Combination()
		l := fmt.Sprintf("`%s`: %s", combo, matrix.Describe(c.Plugins))
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// bodyStr is a body size as "128 B" or "4 KiB"; "?" for 0 (a results
// file from before recovery rows carried it).
func bodyStr(n int) string {
	switch {
	case n <= 0:
		return "?"
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func rangeStr(med, lo, hi float64) string {
	return fmt.Sprintf("%s [%s–%s]", human(med), human(lo), human(hi))
}

func statusStr(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// WriteTable writes the terminal summary: one line per cell, peer and
// recovery measurement.
func (r *Results) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	c := r.Ceilings
	fmt.Fprintf(tw, "CEILINGS\tseq write %.0f MB/s\tserial fdatasync %s/s\tgroup commit %s\n", c.SeqWriteMBPerSec, human(c.SerialFdatasyncPerSec), groupStr(c.GroupCommitPerSec))
	fmt.Fprintln(tw, "\t\t\t")
	fmt.Fprintln(tw, "CELL\tSTATUS\tMSGS/S [MIN–MAX]\tMB/S\tP50\tP99\tP99.9\tCPU s/M\tFSYNC/S\tCEILING\tPAIRED")
	for _, c := range r.Cells {
		if c.Status != "ok" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\t\t\t\t\n", c.Key(), c.Status, truncate(c.Note, 60))
			continue
		}
		fmt.Fprintf(tw, "%s\tok\t%s\t%.1f\t%s\t%s\t%s\t%.2f\t%.0f\t%s\t%s\n", c.Key(), rangeStr(c.MsgsPerSec, c.MsgsPerSecMin, c.MsgsPerSecMax),
			c.MBPerSec, us(c.P50us), us(c.P99us), us(c.P999us), c.CPUSecPerMillion, c.FsyncsPerSec, ceilingStr(c), pairedStr(c))
	}
	if len(r.Peers) > 0 {
		fmt.Fprintln(tw, "\t\t\t")
		fmt.Fprintln(tw, "PEER\tSTATUS\tMSGS/S [MIN–MAX]\tP50\tP99\tP99.9\t")
		for _, p := range r.Peers {
			name := fmt.Sprintf("%s/%s/%dB/p%d", p.Name, p.Config, p.BodyBytes, p.Producers)
			if p.Status != "ok" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\n", name, p.Status, truncate(p.Note, 60))
				continue
			}
			fmt.Fprintf(tw, "%s\tok\t%s\t%s\t%s\t%s\t\n", name, rangeStr(p.MsgsPerSec, p.MsgsPerSecMin, p.MsgsPerSecMax), us(p.P50us), us(p.P99us), us(p.P999us))
		}
	}
	if len(r.Wire) > 0 {
		fmt.Fprintln(tw, "\t\t\t")
		fmt.Fprintln(tw, "WIRE\tSTATUS\tMSGS/S [MIN–MAX]\tP50\tP99\tP99.9\tVS NATS R1\tVS NATS TCP\tOF FLOOR")
		for _, x := range r.Wire {
			if x.Status != "ok" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\n", x.Key(), x.Status, truncate(x.Note, 60))
				continue
			}
			fmt.Fprintf(tw, "%s\tok\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Key(), rangeStr(x.MsgsPerSec, x.MsgsPerSecMin, x.MsgsPerSecMax),
				us(x.P50us), us(x.P99us), us(x.P999us), ratioStr(x.RatioToNATS), ratioStr(x.RatioToNATSTCP), ratioStr(x.RatioToFloor))
		}
	}
	if r.Semantics != nil {
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		writeSemanticsTable(w, r.Semantics)
	}
	if len(r.Failover) > 0 {
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		writeFailoverTable(w, r.Failover)
	}
	if len(r.Recovery) > 0 {
		fmt.Fprintln(tw, "\t\t\t")
		fmt.Fprintln(tw, "RECOVERY\tSTATUS\tSTORE\tREADY\tDISPATCHED\tACKED LOST\tSCANNED\tSLOWEST PHASE (ms)")
		for _, x := range r.Recovery {
			if x.Status != "ok" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\t\n", x.Key(), x.Status, truncate(x.Note, 60))
				continue
			}
			fmt.Fprintf(tw, "%s\tok\t%s\t%.1f ms\t%.1f ms\t%d of %d\t%s\t%s\n", x.Key(), sizeStr(x.StoreBytes), x.ReadyMs, x.DispatchedMs, x.AckedLost, x.Acked,
				sizeStr(x.ScanBytes), x.SlowestPhases(1))
		}
	}
	return tw.Flush()
}

// ceilingStr is "87% of group commit p64", or "n/a" without a ceiling.
func ceilingStr(c Cell) string {
	if c.Ceiling == "" || c.CeilingValue <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%% of %s", 100*c.CeilingRatio, c.Ceiling)
}

// pairedStr is "82% [79–85%]" of the paired ceiling, or "" without one.
func pairedStr(c Cell) string {
	if c.Paired == nil {
		return ""
	}
	r := c.Paired.Ratio
	return fmt.Sprintf("%.0f%% [%.0f–%.0f%%]", 100*r.Median, 100*r.Min, 100*r.Max)
}

// connStr is "8 × 32" (connections × depth), or "8" without a depth cap.
func connStr(w Wire) string {
	if w.Depth <= 0 {
		return strconv.Itoa(w.Connections)
	}
	return fmt.Sprintf("%d × %d", w.Connections, w.Depth)
}

// ratioStr is "1.62×" for a ratio measured beside NATS, else "".
func ratioStr(r float64) string {
	if r <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", r)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func groupStr(m map[string]float64) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		if n, err := strconv.Atoi(k); err == nil {
			keys = append(keys, n)
		}
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("p%d %s/s", k, human(m[strconv.Itoa(k)])))
	}
	return strings.Join(parts, ", ")
}

// WriteMarkdown writes report.md; chartPrefix is prepended to the chart
// file names in image links (empty when the report sits beside them).
func (r *Results) WriteMarkdown(w io.Writer, chartPrefix string) error {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	m := r.Machine
	p("# keel bench: %s", r.Config)
	if r.Quick {
		p(" (--quick)")
	}
	p("\n\n")
	p("Run %s → %s (%s). Config `%s`, schema_version %d.\n\n", r.StartedAt.Format("2006-01-02 15:04:05 MST"), r.FinishedAt.Format("15:04:05"),
		r.FinishedAt.Sub(r.StartedAt).Round(1e9), r.ConfigFile, r.SchemaVersion)
	p("Machine: %s/%s, %d CPUs, %s memory, kernel %s, %s; disk: %s. Load average (1 min) %.2f at the start, %.2f at the end.\n\n",
		m.OS, m.Arch, m.CPUs, sizeStr(m.MemTotalBytes), m.Kernel, m.GoVersion, m.Disk, m.LoadAvgStart, m.LoadAvgEnd)
	s := r.Settings
	p("Each cell: %d runs of %d ms after %d ms warmup; medians with [min–max]; latency percentiles over all runs' acks. Segments of %s, %d queues.\n\n",
		s.Repeats, s.DurationMs, s.WarmupMs, sizeStr(s.SegmentSize), s.Queues)
	for _, n := range r.Notes {
		p("- %s\n", n)
	}
	if len(r.Notes) > 0 {
		p("\n")
	}

	p("## Disk ceilings\n\n")
	c := r.Ceilings
	p("| probe | median | range |\n|---|---|---|\n")
	if d := c.Detail; d != nil {
		for _, sw := range d.SeqWrite {
			p("| sequential write, %s, %s writes + fdatasync | %.0f MB/s | %.0f–%.0f |\n", sw.Method, sizeStr(int64(sw.WriteBytes)), sw.MBPerSec.Median, sw.MBPerSec.Min, sw.MBPerSec.Max)
		}
		for _, sr := range d.Serial {
			p("| serial %s %d B + fdatasync | %s/s (p50 %s, p99 %s) | %s–%s |\n", sr.Method, sr.RecordBytes, human(sr.PerSec.Median), us(sr.P50us), us(sr.P99us), human(sr.PerSec.Min), human(sr.PerSec.Max))
		}
		for _, g := range d.Group {
			p("| group commit %s, %d producers × %d B | %s rec/s (%.0f syncs/s, batch %.1f, p50 %s, p99 %s) | %s–%s |\n", g.Method, g.Producers, g.RecordBytes, human(g.PerSec.Median),
				g.SyncsPerSec, g.AvgBatch, us(g.P50us), us(g.P99us), human(g.PerSec.Min), human(g.PerSec.Max))
		}
	} else {
		p("| (not measured) | | |\n")
	}
	p("\n")

	p("## Cells\n\n")
	p("![throughput per combination, ceiling marked](%s%s)\n\n", chartPrefix, FileThroughput)
	p("\"of ceiling\" divides the median by the ceiling probed at the start of the run; \"of paired ceiling\" (durable cells: acks wait for a flush) is the median, [min–max], of each run divided by the group-commit probe run just before it.\n\n")
	p("| cell | msgs/s [min–max] | MB/s | p50 | p99 | p99.9 | CPU s/M msgs | fsyncs/s | repl lag max | of ceiling | of paired ceiling | statuses |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Cells {
		if c.Status != "ok" {
			p("| `%s` | %s: %s | | | | | | | | | | |\n", c.Key(), c.Status, c.Note)
			continue
		}
		extra := ""
		if c.Workload == "produce-consume" {
			extra = fmt.Sprintf(" (consumed %s/s, e2e p99 %s)", human(c.ConsumeMsgsPerSec), us(c.EndToEndP99us))
		}
		p("| `%s` | %s%s | %.1f | %s | %s | %s | %.2f | %.0f | %s | %s | %s | %s |\n", c.Key(), rangeStr(c.MsgsPerSec, c.MsgsPerSecMin, c.MsgsPerSecMax), extra,
			c.MBPerSec, us(c.P50us), us(c.P99us), us(c.P999us), c.CPUSecPerMillion, c.FsyncsPerSec, sizeStr(c.ReplLagMaxBytes), ceilingStr(c), pairedStr(c),
			statusStr(c.Statuses))
	}
	p("\n")
	if ran := whatRan(r.Cells); len(ran) > 0 {
		p("What ran, per plugin combination (name (builtin | external | path BINARY) {config}):\n\n")
		for _, l := range ran {
			p("- %s\n", l)
		}
		p("\n")
	}
	p("![ack latency CDFs](%s%s)\n\n", chartPrefix, FileLatency)

	p("## Peers (same run, same body size and producer count)\n\n")
	if len(r.Peers) == 0 {
		p("None configured.\n\n")
	} else {
		p("| peer | config | producers | msgs/s [min–max] | p50 | p99 | p99.9 | note |\n|---|---|---|---|---|---|---|---|\n")
		for _, x := range r.Peers {
			if x.Status != "ok" {
				p("| %s | %s | %d | %s | | | | %s |\n", x.Name, x.Config, x.Producers, x.Status, x.Note)
				continue
			}
			p("| %s | %s | %d | %s | %s | %s | %s | %s |\n", x.Name, x.Config, x.Producers, rangeStr(x.MsgsPerSec, x.MsgsPerSecMin, x.MsgsPerSecMax),
				us(x.P50us), us(x.P99us), us(x.P999us), x.Note)
		}
		p("\n")
	}

	if len(r.Wire) > 0 {
		p("## Wire (RocketMQ remoting end to end, NATS JetStream R1 in the same run)\n\n")
		p("| system | profile | producers | conns × depth | msgs/s [min–max] | p50 | p99 | p99.9 | vs NATS R1 | vs NATS R1 over TCP | of protocol floor | statuses | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range r.Wire {
			if x.Status != "ok" {
				p("| %s | %s | %d | %s | %s | | | | | | | | %s |\n", x.Name, x.Profile, x.Producers, connStr(x), x.Status, x.Note)
				continue
			}
			p("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", x.Name, x.Profile, x.Producers, connStr(x),
				rangeStr(x.MsgsPerSec, x.MsgsPerSecMin, x.MsgsPerSecMax), us(x.P50us), us(x.P99us), us(x.P999us), ratioStr(x.RatioToNATS), ratioStr(x.RatioToNATSTCP),
				ratioStr(x.RatioToFloor), statusStr(x.Statuses), x.Note)
		}
		p("\n")
	}

	if r.Semantics != nil {
		writeSemanticsMD(p, r.Semantics)
	}
	if len(r.Failover) > 0 {
		writeFailoverMD(p, r.Failover)
	}

	p("## Recovery\n\n")
	if len(r.Recovery) == 0 {
		p("Not configured.\n\n")
	} else {
		p("![recovery time against store size](%s%s)\n\n", chartPrefix, FileRecovery)
		p("Ready is core.Open; dispatched is until every recovered record is in the consume queues, from the start of Open. " +
			"Scanned is what Open validated record by record (the recovered end minus the scan's start); the phases are the medians of where Open's time went, slowest first.\n\n")
		p("| crash | profile | body | store | ready ms [min–max] | dispatched ms [min–max] | scanned | Open's slowest phases, ms | acked lost (worst run) | acked | cut after the recovered end |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range r.Recovery {
			if x.Status != "ok" {
				p("| %s | %s | %s | %s | %s: %s | | | | | | |\n", x.Crash, x.Profile, bodyStr(x.BodyBytes), sizeStr(x.TargetBytes), x.Status, x.Note)
				continue
			}
			p("| %s | %s | %s | %s | %.1f [%.1f–%.1f] | %.1f [%.1f–%.1f] | %s | %s | %d | %d | %s |\n", x.Crash, x.Profile, bodyStr(x.BodyBytes), sizeStr(x.StoreBytes),
				x.ReadyMs, x.ReadyMsMin, x.ReadyMsMax, x.DispatchedMs, x.DispatchedMsMin, x.DispatchedMsMax, sizeStr(x.ScanBytes), x.SlowestPhases(3),
				x.AckedLost, x.Acked, sizeStr(x.TruncatedBytes))
		}
		p("\n")
	}
	return nil
}
