// Package matrix reads a benchmark matrix: the TOML file (configs/bench/)
// that says which plugin combinations `keel bench` runs, with which
// workloads, for how long and how many times, plus the ceiling probes, the
// recovery workload and the peers measured in the same run.
//
// # Format
//
//	schema      = 1          # required; other values are refused
//	name        = "quick"
//	duration    = "2s"       # measured time of one run of one cell
//	warmup      = "200ms"    # unmeasured time before it
//	repeats     = 3          # runs per cell (>= 3): median, min–max
//	segment_size = "128MiB"  # commitlog segment size of benchmark stores
//	queues      = 8          # queues of the benchmark topic
//
//	[ceiling]                # raw-disk probes (package bench/ceiling)
//	duration = "1s"
//	repeats  = 3
//	file_size = "256MiB"
//	producers = [1, 64, 256] # default: every producer count of the matrix
//
//	[plugins.echo]           # a plugin the axes may name (PluginDecl)
//	kind = "replication"
//	path = "bin/replication-echo"
//	[plugins.echo.config]    # its own [replication.config] table
//	wait_replicas = 1
//
//	[[matrix]]               # one block: the cross product of its axes
//	name        = "flush"
//	workloads   = ["produce", "produce-consume"]
//	flush       = ["sync", "async", "buffered"]
//	replication = ["none", "async", "sync", "echo"]
//	index       = ["none", "hash"]
//	mode        = ["builtin", "external"]
//	body_bytes  = [128, 4096]
//	producers   = [1, 64, 256]
//
// The flush, replication and index axes take the builtin names of the
// catalog given to Parse (keel's own: the flush strategies, "async" and
// "sync", "hash") and the names of [plugins] tables of that kind;
// replication and index also "none". The mode axis applies to builtin
// names listed directly; a [plugins] table runs in its own mode, so one
// cell may mix an external replication with a builtin flush.
//
//	[recovery]
//	sizes     = ["16MiB", "64MiB"]  # commitlog bytes before the crash
//	crashes   = ["kill9", "powercut"]
//	flush     = ["sync", "async"]
//	producers = 4
//	body_bytes = [128, 4096]        # each size is its own row (a plain
//	repeats   = 3                   # integer reads as a one-size list)
//
//	[peers]
//	nats      = ["r1-default", "r1-sync", "r3-sync"]
//	redis     = ["always", "everysec", "always-wait"]
//	producers = [64]
//	body_bytes = [128]
//
//	[wire]                   # keel over the RocketMQ protocol (bench/wire)
//	profiles    = ["default", "sync-flush"]  # empty: part disabled
//	producers   = [64]
//	connections = 8
//	depth       = 32
//	body_bytes  = [128]
//	nats        = true       # NATS JetStream r1-default alongside
//
//	[semantics]              # timers and transactions (SemanticsConfig)
//	profile      = "default"
//	timers       = 1000000
//	timer_window = "60s"
//	tx_duration  = "10s"
//
//	[failover]               # kill -9 a master under load (FailoverConfig)
//	replication = ["async", "sync"]
//	nats        = true       # JetStream R3, stream leader killed
//
// Several [[matrix]] blocks may be given; the cells are the union of their
// cross products, each distinct cell once, in file order. Decoding is
// strict: an unknown key, a value of the wrong type or a value outside the
// allowed set fails with an error naming FILE:LINE:COL where the decoder
// knows it, and the key.
package matrix

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/keelmq/keel/sdk"
)

// SchemaVersion is the matrix format this package reads.
const SchemaVersion = 1

// Allowed values. The flush, replication and index axes take the
// catalog's builtin names and the [plugins] tables (plugins.go).
var (
	Workloads    = []string{WorkloadProduce, WorkloadProduceConsume}
	Crashes      = []string{CrashKill9, CrashPowerCut}
	NATSConfigs  = []string{"r1-default", "r1-default-tcp", "r1-sync", "r3-sync"}
	RedisConfigs = []string{"always", "everysec", "always-wait", "everysec-wait"}
)

// Workload and crash names.
const (
	WorkloadProduce        = "produce"
	WorkloadProduceConsume = "produce-consume"
	CrashKill9             = "kill9"
	CrashPowerCut          = "powercut"
)

// Duration is a TOML string such as "500ms" or "2s" (time.ParseDuration).
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"500ms\", \"2s\")", b)
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Size is a byte count written as a TOML string: "4096", "64KiB", "128MiB",
// "1GiB" (binary units, KiB/MiB/GiB/TiB).
type Size int64

// ParseSize parses a Size string.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q (want e.g. \"4096\", \"64KiB\", \"128MiB\", \"1GiB\")", s)
	}
	return Size(n * mult), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (z *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*z = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (z Size) MarshalText() ([]byte, error) { return []byte(z.String()), nil }

// String writes z with the largest binary unit that divides it.
func (z Size) String() string {
	for _, u := range []struct {
		suf string
		m   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if z != 0 && int64(z)%u.m == 0 {
			return fmt.Sprintf("%d%s", int64(z)/u.m, u.suf)
		}
	}
	return strconv.FormatInt(int64(z), 10)
}

// Ints is a TOML array of integers that also accepts a plain integer as a
// one-element list, so configs written when the key held one value still
// read. Decoding it needs the decoder's unmarshaler interface (Parse
// enables it).
type Ints []int

var _ unstable.Unmarshaler = (*Ints)(nil)

// UnmarshalTOML implements unstable.Unmarshaler; data is the raw value.
func (v *Ints) UnmarshalTOML(data []byte) error {
	var w struct {
		V any `toml:"v"`
	}
	if err := toml.Unmarshal(append([]byte("v = "), data...), &w); err != nil {
		return intsError{data}
	}
	toInt := func(x any) (int, bool) {
		n, ok := x.(int64)
		if !ok || n < math.MinInt || n > math.MaxInt {
			return 0, false
		}
		return int(n), true
	}
	if n, ok := toInt(w.V); ok {
		*v = Ints{n}
		return nil
	}
	xs, ok := w.V.([]any)
	if !ok {
		return intsError{data}
	}
	out := make(Ints, 0, len(xs))
	for _, x := range xs {
		n, ok := toInt(x)
		if !ok {
			return intsError{data}
		}
		out = append(out, n)
	}
	*v = out
	return nil
}

// intsError is Ints' decoding error. The decoder returns it without a
// position; describe names the key.
type intsError struct{ raw []byte }

func (e intsError) Error() string {
	return fmt.Sprintf("want a list of integers such as [128, 4096] (or one integer), got %s", bytes.TrimSpace(e.raw))
}

// Config is a decoded benchmark matrix file.
type Config struct {
	Schema int `toml:"schema"`
	// Name labels the run in the report. Default: the file name.
	Name string `toml:"name"`
	// Duration is the measured time of one run of one cell. Default 2s.
	Duration Duration `toml:"duration"`
	// Warmup runs the cell unmeasured before each run. Default 200ms.
	Warmup Duration `toml:"warmup"`
	// Repeats is the number of runs of each cell, at least 3. Default 3.
	Repeats int `toml:"repeats"`
	// SegmentSize is the commitlog segment size of the benchmark stores.
	// Default 128MiB.
	SegmentSize Size `toml:"segment_size"`
	// Queues is the number of queues of the benchmark topic; producer i
	// writes queue i mod Queues. Default 8.
	Queues int `toml:"queues"`

	Ceiling CeilingConfig `toml:"ceiling"`
	// Plugins are the [plugins.<name>] tables: plugins an axis may list
	// by name beside the builtin names (PluginDecl).
	Plugins  map[string]PluginDecl `toml:"plugins"`
	Matrix   []Block               `toml:"matrix"`
	Recovery RecoveryConfig        `toml:"recovery"`
	Peers    PeersConfig           `toml:"peers"`
	Wire     WireConfig            `toml:"wire"`
	// Semantics is the [semantics] section (SemanticsConfig).
	Semantics SemanticsConfig `toml:"semantics"`
	// Failover is the [failover] section (FailoverConfig).
	Failover FailoverConfig `toml:"failover"`
}

// CeilingConfig configures the raw-disk probes.
type CeilingConfig struct {
	// Disabled skips the probes (every ceiling_ratio is then 0).
	Disabled bool `toml:"disabled"`
	// Duration of one probe run. Default 1s.
	Duration Duration `toml:"duration"`
	// Repeats per probe. Default 3.
	Repeats int `toml:"repeats"`
	// FileSize of the probe's preallocated segment files. Default 256MiB.
	FileSize Size `toml:"file_size"`
	// Producers of the group-commit probe. Default: every producer count
	// used by the matrix.
	Producers []int `toml:"producers"`
}

// Block is one cross product of axis values.
type Block struct {
	Name        string   `toml:"name"`
	Workloads   []string `toml:"workloads"`
	Flush       []string `toml:"flush"`
	Replication []string `toml:"replication"`
	Index       []string `toml:"index"`
	Mode        []string `toml:"mode"`
	BodyBytes   []int    `toml:"body_bytes"`
	Producers   []int    `toml:"producers"`
}

// RecoveryConfig configures the recovery workload.
type RecoveryConfig struct {
	// Sizes are the commitlog sizes of the stores crashed. Empty disables
	// the workload.
	Sizes []Size `toml:"sizes"`
	// Crashes are the crash kinds: "kill9" (SIGKILL of an appending child
	// process) and "powercut" (vfs.CrashFS). Default both.
	Crashes []string `toml:"crashes"`
	// Flush strategies under which the appender runs. Default ["sync",
	// "async"].
	Flush []string `toml:"flush"`
	// Producers appending when the crash comes. Default 4.
	Producers int `toml:"producers"`
	// BodyBytes are the message body sizes measured, each at every size,
	// crash and flush. Default [128]. A plain integer (the format before
	// this was a list) reads as a one-element list.
	BodyBytes Ints `toml:"body_bytes"`
	// Repeats per (crash, flush, body size, size). Default 3.
	Repeats int `toml:"repeats"`
	// SegmentSize of the recovery stores. Default 64MiB.
	SegmentSize Size `toml:"segment_size"`
	// MaxPowerCutSize bounds the sizes used with "powercut", which keeps
	// the whole store in memory twice. Default 256MiB.
	MaxPowerCutSize Size `toml:"max_powercut_size"`
}

// PeersConfig configures the peers measured in the same run.
type PeersConfig struct {
	// NATS JetStream embedded configurations: "r1-default", "r1-sync",
	// "r3-sync".
	NATS []string `toml:"nats"`
	// Redis configurations (skipped when redis-server is not on PATH):
	// "always", "everysec", "always-wait", "everysec-wait".
	Redis []string `toml:"redis"`
	// Producers and BodyBytes: each peer runs at every combination.
	// Default: [64] and [128].
	Producers []int `toml:"producers"`
	BodyBytes []int `toml:"body_bytes"`
	// Duration and Repeats default to the top-level ones.
	Duration Duration `toml:"duration"`
	Repeats  int      `toml:"repeats"`
}

// WireConfig configures the wire part: a keel node started in the
// benchmark's process under each profile, driven over the RocketMQ
// remoting protocol by bench/wire's load generator, with NATS JetStream
// R1 default (bench/peers) measured at the same producers and body size,
// the runs interleaved.
type WireConfig struct {
	// Profiles are keel profiles: a name looked up as
	// configs/profiles/NAME.toml, or a path. Empty disables the part.
	Profiles []string `toml:"profiles"`
	// Producers are the message-in-flight counts measured. Default [64].
	Producers []int `toml:"producers"`
	// Connections is the number of TCP connections the producers share.
	// Default 8 (bench/peers' NATS runner uses min(producers, 8)).
	Connections int `toml:"connections"`
	// Depth caps the outstanding requests of one connection. Default 32.
	Depth int `toml:"depth"`
	// BodyBytes are the body sizes measured. Default [128].
	BodyBytes []int `toml:"body_bytes"`
	// SegmentSize overrides the profile's store.segment_size. Default
	// 256MiB.
	SegmentSize Size `toml:"segment_size"`
	// NATS runs NATS JetStream r1-default alongside (default true); every
	// keel row then carries its ratio to it.
	NATS *bool `toml:"nats"`
	// Floor runs the protocol floor alongside (default true): the same
	// generator against keel's remoting server with a send handler that
	// stores nothing; every keel row then carries its ratio to it.
	Floor *bool `toml:"floor"`
	// Duration and Repeats default to the top-level ones.
	Duration Duration `toml:"duration"`
	Repeats  int      `toml:"repeats"`
}

// WithNATS reports whether NATS JetStream r1-default runs alongside (its
// clients in-process, and again over TCP).
func (w WireConfig) WithNATS() bool { return w.NATS == nil || *w.NATS }

// WithFloor reports whether the protocol floor runs alongside.
func (w WireConfig) WithFloor() bool { return w.Floor == nil || *w.Floor }

// Cell is one combination of the matrix.
type Cell struct {
	Workload    string `json:"workload"`
	Flush       string `json:"flush"`
	Replication string `json:"replication"`
	Index       string `json:"index"`
	Mode        string `json:"mode"`
	BodyBytes   int    `json:"body_bytes"`
	Producers   int    `json:"producers"`
}

// Key identifies the cell: "workload/flush/replication/index/mode/bodyB/pN".
func (c Cell) Key() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s/%dB/p%d", c.Workload, c.Flush, c.Replication, c.Index, c.Mode, c.BodyBytes, c.Producers)
}

// Combination names the plugin combination without size or concurrency:
// "flush+replication+index (mode)".
func (c Cell) Combination() string {
	return fmt.Sprintf("%s+%s+%s (%s)", c.Flush, c.Replication, c.Index, c.Mode)
}

// Load reads and validates the matrix file at path; see Parse.
func Load(path string, cat Catalog) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read bench config: %w", err)
	}
	return Parse(path, b, cat)
}

// Parse decodes and validates a matrix document; file names it in errors.
// Axis values are checked against cat's builtin names (nil:
// DefaultCatalog) and the document's [plugins] tables. The result has
// every default filled in.
func Parse(file string, doc []byte, cat Catalog) (*Config, error) {
	if cat == nil {
		cat = DefaultCatalog()
	}
	var c Config
	dec := toml.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	dec.EnableUnmarshalerInterface() // for Ints
	if err := dec.Decode(&c); err != nil {
		return nil, describe(file, err)
	}
	if c.Name == "" {
		base := file[strings.LastIndexAny(file, `/\`)+1:]
		c.Name = strings.TrimSuffix(base, ".toml")
	}
	c.fill()
	if err := c.Validate(cat); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &c, nil
}

// describe turns a go-toml error into FILE:LINE:COL messages.
func describe(file string, err error) error {
	if ie := (intsError{}); errors.As(err, &ie) {
		// recovery.body_bytes is the only Ints key.
		return fmt.Errorf("%s: recovery.body_bytes: %w", file, ie)
	}
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		var errs []error
		for i := range sm.Errors {
			e := &sm.Errors[i]
			row, col := e.Position()
			errs = append(errs, fmt.Errorf("%s:%d:%d: unknown key %q", file, row, col, strings.Join(e.Key(), ".")))
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		key := strings.Join(de.Key(), ".")
		if key != "" {
			return fmt.Errorf("%s:%d:%d: %s: %s", file, row, col, key, de.Error())
		}
		return fmt.Errorf("%s:%d:%d: %s", file, row, col, de.Error())
	}
	return fmt.Errorf("%s: %w", file, err)
}

func (c *Config) fill() {
	def := func(d *Duration, v time.Duration) {
		if *d == 0 {
			*d = Duration(v)
		}
	}
	defInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Duration, 2*time.Second)
	def(&c.Warmup, 200*time.Millisecond)
	defInt(&c.Repeats, 3)
	defInt(&c.Queues, 8)
	if c.SegmentSize == 0 {
		c.SegmentSize = 128 << 20
	}
	def(&c.Ceiling.Duration, time.Second)
	defInt(&c.Ceiling.Repeats, 3)
	if c.Ceiling.FileSize == 0 {
		c.Ceiling.FileSize = 256 << 20
	}
	for i := range c.Matrix {
		b := &c.Matrix[i]
		if b.Name == "" {
			b.Name = fmt.Sprintf("block%d", i+1)
		}
		defS := func(p *[]string, v ...string) {
			if len(*p) == 0 {
				*p = v
			}
		}
		defS(&b.Workloads, WorkloadProduce)
		defS(&b.Flush, "sync")
		defS(&b.Replication, None)
		defS(&b.Index, None)
		defS(&b.Mode, ModeBuiltin)
		if len(b.BodyBytes) == 0 {
			b.BodyBytes = []int{128}
		}
		if len(b.Producers) == 0 {
			b.Producers = []int{1}
		}
	}
	if len(c.Ceiling.Producers) == 0 {
		c.Ceiling.Producers = c.ProducerCounts()
	}
	c.fillPlugins()
	r := &c.Recovery
	if len(r.Crashes) == 0 {
		r.Crashes = slices.Clone(Crashes)
	}
	if len(r.Flush) == 0 {
		r.Flush = []string{"sync", "async"}
	}
	defInt(&r.Producers, 4)
	if len(r.BodyBytes) == 0 {
		r.BodyBytes = Ints{128}
	}
	defInt(&r.Repeats, 3)
	if r.SegmentSize == 0 {
		r.SegmentSize = 64 << 20
	}
	if r.MaxPowerCutSize == 0 {
		r.MaxPowerCutSize = 256 << 20
	}
	p := &c.Peers
	if len(p.Producers) == 0 {
		p.Producers = []int{64}
	}
	if len(p.BodyBytes) == 0 {
		p.BodyBytes = []int{128}
	}
	if p.Duration == 0 {
		p.Duration = c.Duration
	}
	defInt(&p.Repeats, c.Repeats)
	w := &c.Wire
	if len(w.Producers) == 0 {
		w.Producers = []int{64}
	}
	if len(w.BodyBytes) == 0 {
		w.BodyBytes = []int{128}
	}
	defInt(&w.Connections, 8)
	defInt(&w.Depth, 32)
	if w.SegmentSize == 0 {
		w.SegmentSize = 256 << 20
	}
	if w.Duration == 0 {
		w.Duration = c.Duration
	}
	defInt(&w.Repeats, c.Repeats)
	c.Semantics.fill()
	c.Failover.fill()
}

// Limits of numeric settings.
const (
	MaxProducers = 4096
	MaxBodyBytes = 4 << 20
)

// Validate checks every value against its allowed set or range; the
// plugin axes against cat's builtin names and the [plugins] tables.
func (c *Config) Validate(cat Catalog) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Schema != SchemaVersion {
		bad("schema: got %d, this keel reads schema = %d", c.Schema, SchemaVersion)
	}
	if c.Repeats < 3 {
		bad("repeats: %d, want at least 3 (results are medians)", c.Repeats)
	}
	if c.Duration.D() < time.Millisecond {
		bad("duration: %v is too short (want >= 1ms)", c.Duration.D())
	}
	if c.Queues < 1 || c.Queues > 1024 {
		bad("queues: %d outside [1, 1024]", c.Queues)
	}
	if c.SegmentSize < 1<<20 {
		bad("segment_size: %v, want at least 1MiB", c.SegmentSize)
	}
	if c.Ceiling.Repeats < 1 {
		bad("ceiling.repeats: %d, want >= 1", c.Ceiling.Repeats)
	}
	if c.Ceiling.FileSize < 1<<20 {
		bad("ceiling.file_size: %v, want at least 1MiB", c.Ceiling.FileSize)
	}
	checkInts := func(key string, vs []int, lo, hi int) {
		for _, v := range vs {
			if v < lo || v > hi {
				bad("%s: %d outside [%d, %d]", key, v, lo, hi)
			}
		}
	}
	checkStrs := func(key string, vs, allowed []string) {
		for _, v := range vs {
			if !slices.Contains(allowed, v) {
				bad("%s: %q is not one of %q", key, v, allowed)
			}
		}
	}
	checkInts("ceiling.producers", c.Ceiling.Producers, 1, MaxProducers)
	c.validatePlugins(cat, bad)
	for i, b := range c.Matrix {
		k := fmt.Sprintf("matrix[%d] (%s)", i, b.Name)
		checkStrs(k+".workloads", b.Workloads, Workloads)
		c.checkAxis(k+".flush", sdk.KindFlush, b.Flush, cat, bad)
		c.checkAxis(k+".replication", sdk.KindReplication, b.Replication, cat, bad)
		c.checkAxis(k+".index", sdk.KindIndex, b.Index, cat, bad)
		checkStrs(k+".mode", b.Mode, Modes)
		checkInts(k+".body_bytes", b.BodyBytes, 1, MaxBodyBytes)
		checkInts(k+".producers", b.Producers, 1, MaxProducers)
		for _, n := range b.BodyBytes {
			if int64(n)+64<<10 > int64(c.SegmentSize) {
				bad("%s.body_bytes: %d does not fit segment_size %v", k, n, c.SegmentSize)
			}
		}
	}
	r := c.Recovery
	for _, z := range r.Sizes {
		if z < 1<<20 {
			bad("recovery.sizes: %v, want at least 1MiB", z)
		}
	}
	checkStrs("recovery.crashes", r.Crashes, Crashes)
	checkStrs("recovery.flush", r.Flush, []string{"sync", "async"})
	checkInts("recovery.producers", []int{r.Producers}, 1, 256)
	checkInts("recovery.body_bytes", r.BodyBytes, 1, MaxBodyBytes)
	for _, n := range r.BodyBytes {
		if n <= MaxBodyBytes && int64(n)+64<<10 > int64(r.SegmentSize) {
			bad("recovery.body_bytes: %d does not fit recovery.segment_size %v", n, r.SegmentSize)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(r.BodyBytes)))) != len(r.BodyBytes) {
		bad("recovery.body_bytes: %v lists a size twice", []int(r.BodyBytes))
	}
	if r.Repeats < 1 {
		bad("recovery.repeats: %d, want >= 1", r.Repeats)
	}
	if r.SegmentSize < 1<<20 {
		bad("recovery.segment_size: %v, want at least 1MiB", r.SegmentSize)
	}
	p := c.Peers
	checkStrs("peers.nats", p.NATS, NATSConfigs)
	checkStrs("peers.redis", p.Redis, RedisConfigs)
	checkInts("peers.producers", p.Producers, 1, MaxProducers)
	checkInts("peers.body_bytes", p.BodyBytes, 1, 1<<20)
	if p.Repeats < 1 {
		bad("peers.repeats: %d, want >= 1", p.Repeats)
	}
	w := c.Wire
	for _, name := range w.Profiles {
		if strings.TrimSpace(name) == "" {
			bad("wire.profiles: an empty profile name")
		}
	}
	checkInts("wire.producers", w.Producers, 1, MaxProducers)
	checkInts("wire.connections", []int{w.Connections}, 1, 1024)
	checkInts("wire.depth", []int{w.Depth}, 1, 1<<16)
	checkInts("wire.body_bytes", w.BodyBytes, 1, 1<<20)
	if w.SegmentSize < 1<<20 {
		bad("wire.segment_size: %v, want at least 1MiB", w.SegmentSize)
	}
	if w.Repeats < 1 {
		bad("wire.repeats: %d, want >= 1", w.Repeats)
	}
	c.Semantics.validate(bad)
	c.Failover.validate(bad)
	return errors.Join(errs...)
}

// Cells returns the distinct cells of every block, in file order.
func (c *Config) Cells() []Cell {
	var out []Cell
	seen := map[Cell]bool{}
	for _, b := range c.Matrix {
		for _, w := range b.Workloads {
			for _, f := range b.Flush {
				for _, r := range b.Replication {
					for _, ix := range b.Index {
						for _, m := range b.Mode {
							for _, body := range b.BodyBytes {
								for _, p := range b.Producers {
									cell := Cell{Workload: w, Flush: f, Replication: r, Index: ix, Mode: m, BodyBytes: body, Producers: p}
									if !seen[cell] {
										seen[cell] = true
										out = append(out, cell)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// ProducerCounts is the sorted set of producer counts the matrix uses.
func (c *Config) ProducerCounts() []int {
	var ps []int
	for _, b := range c.Matrix {
		ps = append(ps, b.Producers...)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// BodySizes is the sorted set of body sizes the matrix uses.
func (c *Config) BodySizes() []int {
	var bs []int
	for _, b := range c.Matrix {
		bs = append(bs, b.BodyBytes...)
	}
	slices.Sort(bs)
	return slices.Compact(bs)
}

// Quick returns a copy trimmed to fit `keel bench --quick` (under three
// minutes on two cores): cell, peer and wire runs last at most 1s with a warmup
// of at most 100ms, ceiling runs at most 500ms, cells, peers and wire repeat
// exactly 3 times, recovery keeps its two smallest sizes and its
// smallest body size, with one repeat each, and the semantics part is
// trimmed as SemanticsConfig's quick says (the failover part as
// FailoverConfig's). The matrix axes are not
// changed.
func (c *Config) Quick() *Config {
	q := *c
	q.Matrix = slices.Clone(c.Matrix)
	q.Duration = Duration(min(c.Duration.D(), time.Second))
	q.Warmup = Duration(min(c.Warmup.D(), 100*time.Millisecond))
	q.Repeats = 3
	q.Ceiling.Duration = Duration(min(c.Ceiling.Duration.D(), 500*time.Millisecond))
	q.Ceiling.Repeats = min(c.Ceiling.Repeats, 3)
	q.Recovery.Sizes = slices.Clone(c.Recovery.Sizes)
	slices.Sort(q.Recovery.Sizes)
	if len(q.Recovery.Sizes) > 2 {
		q.Recovery.Sizes = q.Recovery.Sizes[:2]
	}
	if len(c.Recovery.BodyBytes) > 0 {
		q.Recovery.BodyBytes = Ints{slices.Min(c.Recovery.BodyBytes)}
	}
	q.Recovery.Repeats = 1
	q.Peers.Duration = Duration(min(c.Peers.Duration.D(), time.Second))
	q.Peers.Repeats = 3
	q.Wire.Duration = Duration(min(c.Wire.Duration.D(), time.Second))
	q.Wire.Repeats = 3
	q.Semantics = c.Semantics.quick()
	q.Failover = c.Failover.quick()
	return &q
}

// RecoveryRuns is the number of recovery measurements: every crash,
// flush, body size and store size, Repeats times (powercut sizes above
// max_powercut_size included: they are counted, and skipped, too).
func (c *Config) RecoveryRuns() int {
	r := c.Recovery
	return len(r.Sizes) * len(r.Crashes) * len(r.Flush) * len(r.BodyBytes) * r.Repeats
}

// Estimate is a rough lower bound of the wall time of a run of c: measured
// and warmup time of every cell, probe and peer run, without setup costs.
func (c *Config) Estimate() time.Duration {
	cells := time.Duration(len(c.Cells()) * c.Repeats)
	t := cells * (c.Duration.D() + c.Warmup.D())
	if !c.Ceiling.Disabled {
		probes := 4 + 2*len(c.BodySizes()) + 2*len(c.Ceiling.Producers)*len(c.BodySizes())
		t += time.Duration(probes*c.Ceiling.Repeats) * c.Ceiling.Duration.D()
	}
	peers := len(c.Peers.NATS) + len(c.Peers.Redis)
	t += time.Duration(peers*len(c.Peers.Producers)*len(c.Peers.BodyBytes)*c.Peers.Repeats) * c.Peers.Duration.D()
	t += time.Duration(c.WireRuns()) * (c.Wire.Duration.D() + c.Warmup.D())
	t += c.Semantics.estimate()
	t += c.Failover.estimate(c.FailoverRuns())
	return t
}

// WireRuns is the number of runs of the wire part: every profile, plus
// NATS when enabled, at every producer count and body size, Repeats
// times. It is 0 when no profile is configured.
func (c *Config) WireRuns() int {
	w := c.Wire
	if len(w.Profiles) == 0 {
		return 0
	}
	systems := len(w.Profiles)
	if w.WithNATS() {
		systems += 2 // in-process and over TCP
	}
	if w.WithFloor() {
		systems++
	}
	return systems * len(w.Producers) * len(w.BodyBytes) * w.Repeats
}
