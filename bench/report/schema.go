// Package report holds the results of a `keel bench` run (the versioned
// results.json schema) and writes them as JSON, CSV, a terminal table and
// a Markdown report with SVG charts.
package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/keelmq/keel/bench/ceiling"
	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/matrix"
)

// SchemaVersion is the version of the results.json layout. It changes
// when a field is removed or changes meaning; added fields do not change
// it. docs/benchmarks.md documents every field.
const SchemaVersion = 1

// Results is the whole of results.json.
type Results struct {
	SchemaVersion int        `json:"schema_version"`
	Tool          string     `json:"tool"`   // "keel bench"
	Config        string     `json:"config"` // the matrix name
	ConfigFile    string     `json:"config_file"`
	Quick         bool       `json:"quick"`
	StartedAt     time.Time  `json:"started_at"`
	FinishedAt    time.Time  `json:"finished_at"`
	Machine       Machine    `json:"machine"`
	Settings      Settings   `json:"settings"`
	Ceilings      Ceilings   `json:"ceilings"`
	Cells         []Cell     `json:"cells"`
	Peers         []Peer     `json:"peers"`
	Recovery      []Recovery `json:"recovery"`
	// Wire has keel measured end to end over the RocketMQ remoting
	// protocol, and NATS JetStream r1-default beside it (added in schema
	// version 1; absent from older files).
	Wire []Wire `json:"wire"`
	// Semantics has timer messages and transactional sends beside plain
	// sends (package bench/semantics); nil when the part did not run.
	// Added within schema version 1.
	Semantics *Semantics `json:"semantics,omitempty"`
	// Failover has the failover part (package bench/failover): keel's
	// master killed under load beside NATS JetStream R3; absent when the
	// part did not run. Added within schema version 1.
	Failover []Failover `json:"failover,omitempty"`
	// Notes are things the reader must know (skipped peers, skipped
	// cells, ...).
	Notes []string `json:"notes"`
}

// Machine describes where the run happened.
type Machine struct {
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	CPUs          int    `json:"cpus"`
	GoVersion     string `json:"go_version"`
	MemTotalBytes int64  `json:"mem_total_bytes"`
	Kernel        string `json:"kernel"`
	// Disk is the filesystem of the scratch directory: device, type and
	// size (from /proc/mounts and statfs).
	Disk string `json:"disk"`
	// LoadAvgStart and LoadAvgEnd are the 1-minute load averages when the
	// run started and ended: other work on the machine skews every number.
	LoadAvgStart float64 `json:"load_avg_start"`
	LoadAvgEnd   float64 `json:"load_avg_end"`
}

// Settings are the run's effective timing settings.
type Settings struct {
	DurationMs  int64 `json:"duration_ms"`
	WarmupMs    int64 `json:"warmup_ms"`
	Repeats     int   `json:"repeats"`
	SegmentSize int64 `json:"segment_size"`
	Queues      int   `json:"queues"`
}

// Ceilings are the raw-disk limits measured at the start of the run.
type Ceilings struct {
	// SeqWriteMBPerSec is the median sequential bandwidth through mmap
	// with 1 MiB writes (the store's write path), fdatasync included, in
	// 10^6 bytes/s.
	SeqWriteMBPerSec float64 `json:"seq_write_mb_per_sec"`
	// SerialFdatasyncPerSec is the median rate of pwrite(record) +
	// fdatasync from one goroutine.
	SerialFdatasyncPerSec float64 `json:"serial_fdatasync_per_sec"`
	// GroupCommitPerSec is the median group-commit ceiling in records/s,
	// keyed by producer count (decimal string), for the stored record size
	// of the smallest body in the matrix.
	GroupCommitPerSec map[string]float64 `json:"group_commit_per_sec"`
	// Detail has every probe with min–max, write sizes and record sizes.
	Detail *ceiling.Result `json:"detail,omitempty"`
}

// Cell is one matrix cell over its repeats.
type Cell struct {
	Workload    string `json:"workload"`
	Flush       string `json:"flush"`
	Replication string `json:"replication"`
	Index       string `json:"index"`
	Mode        string `json:"mode"`
	BodyBytes   int    `json:"body_bytes"`
	Producers   int    `json:"producers"`
	// Status is "ok", "skipped" (not available here; Note says why) or
	// "error" (Note has the error).
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
	// Impl says what ran, as one line (matrix.Describe): "flush=sync
	// (builtin) replication=echo (path bin/replication-echo)".
	Impl string `json:"impl,omitempty"`
	// Plugins are what ran, one per axis that runs a plugin (flush, then
	// replication and index unless "none"): the axis value, the builtin
	// name or path, the mode and the plugin's config table.
	Plugins     []matrix.Plugin `json:"plugins,omitempty"`
	RecordBytes int             `json:"record_bytes"`
	// MsgsPerSec is the median over runs of acknowledged messages per
	// second; Min and Max the range.
	MsgsPerSec    float64 `json:"msgs_per_sec"`
	MsgsPerSecMin float64 `json:"msgs_per_sec_min"`
	MsgsPerSecMax float64 `json:"msgs_per_sec_max"`
	// MBPerSec is MsgsPerSec × body bytes / 10^6 (payload).
	MBPerSec float64 `json:"mb_per_sec"`
	// Ack latency percentiles over all runs' acks, microseconds.
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	P999us float64 `json:"p999_us"`
	// CPUSecPerMillion is the median process CPU (user+system) seconds per
	// million acknowledged messages.
	CPUSecPerMillion float64 `json:"cpu_sec_per_million"`
	// FsyncsPerSec is the median rate of flushes that made new bytes
	// durable.
	FsyncsPerSec float64 `json:"fsyncs_per_sec"`
	// Statuses counts producer statuses over all runs.
	Statuses map[string]int64 `json:"statuses"`
	// Replication lag, master committed minus acknowledged: the maximum
	// seen and the median of the runs' means, bytes.
	ReplLagMaxBytes  int64   `json:"repl_lag_max_bytes"`
	ReplLagMeanBytes float64 `json:"repl_lag_mean_bytes"`
	// Consumer side of produce-consume: median received msgs/s and the
	// end-to-end p99 (append to read), microseconds.
	ConsumeMsgsPerSec float64 `json:"consume_msgs_per_sec,omitempty"`
	EndToEndP99us     float64 `json:"e2e_p99_us,omitempty"`
	// CeilingRatio is MsgsPerSec divided by the matching ceiling: the
	// group-commit ceiling at the same producer count when acks wait for a
	// flush, else stored bytes/s over SeqWriteMBPerSec. Ceiling names it
	// and CeilingValue gives it in the same unit as the numerator.
	CeilingRatio float64 `json:"ceiling_ratio"`
	Ceiling      string  `json:"ceiling,omitempty"`
	CeilingValue float64 `json:"ceiling_value,omitempty"`
	// Paired is, for a durable cell (acks wait for a flush) when the
	// ceiling probes ran, its group-commit ceiling measured right before
	// each of its runs, so that each ratio compares the same minute of the
	// disk; nil otherwise.
	Paired *Paired `json:"paired_ceiling,omitempty"`
	// Runs are the individual runs.
	Runs []Run `json:"runs,omitempty"`
	// CDF is the ack latency distribution over all runs (microseconds,
	// fraction), thinned to at most 64 points.
	CDF []CDFPoint `json:"cdf,omitempty"`
}

// Key identifies the cell like matrix.Cell.Key.
func (c *Cell) Key() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s/%dB/p%d", c.Workload, c.Flush, c.Replication, c.Index, c.Mode, c.BodyBytes, c.Producers)
}

// Paired is a durable cell's ceiling probes, interleaved with its runs
// (probe, run, probe, run, ...).
type Paired struct {
	// Probe names it: "group commit mmap p64 × 172 B" (same producers and
	// stored record size as the cell; the method that won the run's
	// ceiling probe).
	Probe string `json:"probe"`
	// PerSec is the probe's records/s, one per run in run order, with
	// median and min–max.
	PerSec ceiling.Stat `json:"per_sec"`
	// Ratio is run i's msgs/s over probe i's records/s, per pair in run
	// order, with median and min–max: the cell's share of the disk it
	// had at that minute.
	Ratio ceiling.Stat `json:"ratio"`
}

// ratio is p's Ratio; the zero Stat for a nil p.
func (p *Paired) ratio() ceiling.Stat {
	if p == nil {
		return ceiling.Stat{}
	}
	return p.Ratio
}

// Run is one run of a cell or peer.
type Run struct {
	MsgsPerSec float64 `json:"msgs_per_sec"`
	P99us      float64 `json:"p99_us"`
}

// CDFPoint is one point of a latency distribution.
type CDFPoint struct {
	Us       float64 `json:"us"`
	Fraction float64 `json:"fraction"`
}

// ThinCDF is h's CDF (values in ns) as at most 64 points in µs, keeping
// the last point.
func ThinCDF(h *hist.Histogram) []CDFPoint {
	pts := h.CDF()
	var out []CDFPoint
	step := max(1, (len(pts)+63)/64)
	for i := 0; i < len(pts); i += step {
		out = append(out, CDFPoint{Us: float64(pts[i].Value) / 1e3, Fraction: pts[i].Fraction})
	}
	if len(pts) > 0 && (len(pts)-1)%step != 0 {
		last := pts[len(pts)-1]
		out = append(out, CDFPoint{Us: float64(last.Value) / 1e3, Fraction: last.Fraction})
	}
	return out
}

// Peer is one peer configuration over its repeats.
type Peer struct {
	Name      string `json:"name"`   // "nats-jetstream" or "redis"
	Config    string `json:"config"` // "r1-default", "always-wait", ...
	Producers int    `json:"producers"`
	BodyBytes int    `json:"body_bytes"`
	Status    string `json:"status"` // "ok", "skipped", "error"
	Note      string `json:"note,omitempty"`

	MsgsPerSec    float64    `json:"msgs_per_sec"`
	MsgsPerSecMin float64    `json:"msgs_per_sec_min"`
	MsgsPerSecMax float64    `json:"msgs_per_sec_max"`
	P50us         float64    `json:"p50_us"`
	P99us         float64    `json:"p99_us"`
	P999us        float64    `json:"p999_us"`
	Errors        int64      `json:"errors"`
	Runs          []Run      `json:"runs,omitempty"`
	CDF           []CDFPoint `json:"cdf,omitempty"`
}

// Wire is one system of the wire part at one producer count and body
// size, over its repeats: keel under a profile, driven by bench/wire's
// load generator over TCP, or the NATS JetStream peer measured in the same
// run, interleaved with it.
type Wire struct {
	// Name is "keel", "nats-jetstream" or "protocol-floor".
	Name string `json:"name"`
	// Profile is the keel profile ("default", "sync-flush", ...) or the
	// NATS configuration ("r1-default").
	Profile   string `json:"profile"`
	Producers int    `json:"producers"`
	// Connections and Depth are the generator's TCP connections and its
	// cap on outstanding requests per connection (keel rows; NATS rows
	// give the client connections and 0).
	Connections int    `json:"connections"`
	Depth       int    `json:"depth"`
	BodyBytes   int    `json:"body_bytes"`
	Status      string `json:"status"` // "ok", "skipped", "error"
	Note        string `json:"note,omitempty"`
	// MsgsPerSec is the median over runs of stored (acknowledged)
	// messages per second; Min and Max the range.
	MsgsPerSec    float64 `json:"msgs_per_sec"`
	MsgsPerSecMin float64 `json:"msgs_per_sec_min"`
	MsgsPerSecMax float64 `json:"msgs_per_sec_max"`
	// Ack latency percentiles over all runs' requests, microseconds.
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	P999us float64 `json:"p999_us"`
	// Statuses counts producer statuses over all runs (SEND_OK,
	// FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE,
	// ERROR); NATS rows count successful publishes as SEND_OK.
	Statuses map[string]int64 `json:"statuses"`
	// Errors counts failed requests over all runs.
	Errors int64 `json:"errors"`
	// NATSMsgsPerSec and RatioToNATS (keel rows): the median msgs/s of
	// the nats-jetstream row with the same producers and body size, and
	// MsgsPerSec divided by it; 0 when NATS did not run.
	NATSMsgsPerSec float64 `json:"nats_msgs_per_sec,omitempty"`
	RatioToNATS    float64 `json:"ratio_to_nats,omitempty"`
	// NATSTCPMsgsPerSec and RatioToNATSTCP: the same against the
	// r1-default-tcp row (NATS clients over TCP loopback, like keel's
	// generator); added within schema version 1.
	NATSTCPMsgsPerSec float64 `json:"nats_tcp_msgs_per_sec,omitempty"`
	RatioToNATSTCP    float64 `json:"ratio_to_nats_tcp,omitempty"`
	// FloorMsgsPerSec and RatioToFloor (keel rows): the median msgs/s of
	// the protocol-floor row (keel's remoting server storing nothing,
	// same generator) with the same producers and body size, and
	// MsgsPerSec divided by it; 0 when the floor did not run. Added
	// within schema version 1.
	FloorMsgsPerSec float64    `json:"floor_msgs_per_sec,omitempty"`
	RatioToFloor    float64    `json:"ratio_to_floor,omitempty"`
	Runs            []Run      `json:"runs,omitempty"`
	CDF             []CDFPoint `json:"cdf,omitempty"`
}

// Key identifies the row: "keel/sync-flush/128B/p64".
func (w *Wire) Key() string {
	return fmt.Sprintf("%s/%s/%dB/p%d", w.Name, w.Profile, w.BodyBytes, w.Producers)
}

// Recovery is one (crash, profile, body size, store size) recovery
// measurement over its repeats.
type Recovery struct {
	// Profile is the appender's flush strategy: "sync-flush" or
	// "async-flush".
	Profile string `json:"profile"`
	// BodyBytes is the body size of every message in the store (added
	// within schema version 1; 0 in older files, whose single size was
	// the config's recovery.body_bytes).
	BodyBytes int `json:"body_bytes"`
	// TargetBytes is the configured size; StoreBytes the median commitlog
	// size at the crash.
	TargetBytes int64  `json:"target_bytes"`
	StoreBytes  int64  `json:"store_bytes"`
	Crash       string `json:"crash"` // "kill9" or "powercut"
	Status      string `json:"status"`
	Note        string `json:"note,omitempty"`
	// ReadyMs (core.Open) and DispatchedMs (until every recovered record
	// is dispatched), medians with ranges.
	ReadyMs         float64 `json:"ready_ms"`
	ReadyMsMin      float64 `json:"ready_ms_min"`
	ReadyMsMax      float64 `json:"ready_ms_max"`
	DispatchedMs    float64 `json:"dispatched_ms"`
	DispatchedMsMin float64 `json:"dispatched_ms_min"`
	DispatchedMsMax float64 `json:"dispatched_ms_max"`
	// AckedLost is the largest number of acknowledged messages lost in any
	// repeat; Acked the median number acknowledged before the crash.
	AckedLost     int64   `json:"acked_lost"`
	AckedLostRuns []int64 `json:"acked_lost_runs"`
	Acked         int64   `json:"acked"`
	// TruncatedBytes is the median of what recovery cut after the
	// recovered end: up to the end of that segment (core reports this
	// upper bound of the torn tail, zero padding included).
	TruncatedBytes int64 `json:"truncated_bytes"`
	// ScanBytes is the median number of commitlog bytes Open validated
	// (the recovered end minus where the scan started); PhasesMs the
	// median per phase of where Open's time went (core.RecoveryInfo's
	// phases: segments, queues, scan, cut, truncate-queues, finish).
	// Both added within schema version 1.
	ScanBytes int64              `json:"scan_bytes"`
	PhasesMs  map[string]float64 `json:"phases_ms,omitempty"`
	Repeats   int                `json:"repeats"`
}

// Key identifies the row: "kill9/async-flush/128B/1.0 GiB" (the
// configured size).
func (x *Recovery) Key() string {
	return fmt.Sprintf("%s/%s/%dB/%s", x.Crash, x.Profile, x.BodyBytes, sizeStr(x.TargetBytes))
}

// SlowestPhases is PhasesMs as "scan 812.3, cut 40.1, …", slowest first,
// at most n phases; "" without phases.
func (x *Recovery) SlowestPhases(n int) string {
	names := make([]string, 0, len(x.PhasesMs))
	for k := range x.PhasesMs {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(x.PhasesMs[b], x.PhasesMs[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, x.PhasesMs[k]))
	}
	return strings.Join(parts, ", ")
}

// WriteJSON writes r as indented JSON.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads results.json, refusing other schema versions.
func ReadJSON(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode results %s: %w", path, err)
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("results %s: schema_version %d, this keel reads %d", path, r.SchemaVersion, SchemaVersion)
	}
	return &r, nil
}
