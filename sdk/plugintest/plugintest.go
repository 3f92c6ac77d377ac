// Package plugintest is the conformance suite every keel plugin
// implementation must pass, one suite per plugin kind: RunFlush,
// RunIndex and RunReplication. A plugin author calls the suite from a test
// with a function that returns a fresh, unconfigured instance of the
// plugin:
//
//	func TestConformance(t *testing.T) {
//		plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return myrepl.New() })
//	}
//
// The same suite body runs against the plugin as an external process:
// Build compiles the plugin's main package once per test binary run and
// ExternalReplicator (ExternalFlush, ExternalIndexer) starts one process
// per instance and hands back the gRPC adapter, which implements the same
// interface:
//
//	func TestConformanceExternal(t *testing.T) {
//		bin := plugintest.Build(t, "./cmd/myrepl")
//		plugintest.RunReplication(t, plugintest.ExternalReplicator(bin))
//	}
//
// Each suite builds real core stores in t.TempDir (and on a vfs.CrashFS for
// its power-cut checks), serves them to the plugin through storehost.Host,
// writes a minimal profile whose [<section>.config] table is the snippet
// given with WithConfig, and Configures and Starts the plugin with it. The
// suites only talk to 127.0.0.1.
package plugintest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/internal/pluginrpc"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Option adjusts a suite run.
type Option func(*options)

type options struct {
	config      string
	asyncWithin time.Duration
	producers   int
	perProducer int
	logLevel    slog.Level
	// replicaFlush: the replication policy's replicas acknowledge only
	// what they flushed (WithReplicaAckOnFlush).
	replicaFlush bool
	// repair: the DivergentTail fault requires the new master to take
	// writes again (WithDivergentTailRepair).
	repair bool
	// oldMasterDelay: the DivergentTail fault delays the old master's
	// link to the new master by this much (the suite's own tests).
	oldMasterDelay time.Duration
}

func buildOptions(opts []Option) options {
	o := options{asyncWithin: 3 * time.Second, producers: 4, perProducer: 150, logLevel: slog.LevelWarn}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithConfig sets the TOML placed in the plugin's [<section>.config] table
// of the profile the suite writes (for example `interval = "10ms"`).
func WithConfig(toml string) Option { return func(o *options) { o.config = toml } }

// WithAsyncFlushWithin bounds how long a flush strategy whose policy does
// not wait for flushes may take to flush an appended record (default 3 s;
// give a few of the strategy's intervals).
func WithAsyncFlushWithin(d time.Duration) Option { return func(o *options) { o.asyncWithin = d } }

// WithLoad sets the number of concurrent producers and the records each
// appends in the load checks (default 4 × 150).
func WithLoad(producers, perProducer int) Option {
	return func(o *options) { o.producers, o.perProducer = producers, perProducer }
}

// WithReplicaAckOnFlush tells RunReplication that the configuration
// given with WithConfig makes replicas acknowledge only bytes they
// flushed (ack-on-flush, such as the builtins' ack_on = "flushed"): the
// suite then requires every acknowledged byte to be flushed on the
// replicas counted, and a replica's power cut to lose none of them.
func WithReplicaAckOnFlush() Option { return func(o *options) { o.replicaFlush = true } }

// WithLogLevel sets the level at which the stores' and the plugin's logs
// reach t.Log (default warn).
func WithLogLevel(l slog.Level) Option { return func(o *options) { o.logLevel = l } }

// ---------------------------------------------------------------- stores

// env is one store with its Host.
type env struct {
	t      testing.TB
	opts   core.Options
	crash  *vfs.CrashFS // nil on the OS filesystem
	store  *core.Store
	host   *storehost.Host
	clock  atomic.Int64 // store timestamps (ms), one tick per append
	logger *slog.Logger
}

// newEnv opens a store in a fresh directory; on a CrashFS when crash.
// listeners are dispatch listeners (indexers).
func newEnv(t testing.TB, o options, crash bool, listeners ...core.DispatchListener) *env {
	t.Helper()
	e := &env{t: t, logger: testLogger(t, o.logLevel)}
	e.clock.Store(1_700_000_000_000)
	e.opts = core.Options{
		Dir:              filepath.Join(t.TempDir(), "store"),
		Logger:           e.logger,
		SegmentSize:      1 << 20,
		MaxMessageSize:   64 << 10,
		CQEntriesPerFile: 1024,
		CheckpointEvery:  20 * time.Millisecond,
		Listeners:        listeners,
		Now:              func() int64 { return e.clock.Add(1) },
		Retention:        core.RetentionOptions{FileReservedTime: -1},
	}
	if crash {
		e.crash = vfs.NewCrashFS(time.Now().UnixNano())
		e.opts.FS = e.crash
		e.opts.Dir = "/store"
	}
	e.open()
	t.Cleanup(func() { e.close() })
	return e
}

func (e *env) open() {
	e.t.Helper()
	s, err := core.Open(e.opts)
	if err != nil {
		e.t.Fatalf("open store: %v", err)
	}
	e.store = s
	e.host = storehost.New(s, e.logger)
}

func (e *env) close() {
	if e.store != nil {
		_ = e.store.Close()
		e.store = nil
	}
}

// powerCut simulates a power cut while everything runs: from now on no
// write reaches the (simulated) disk and every fsync fails. The store is
// then closed (its goroutines stop; its final flush fails), the CrashFS
// keeps only what was durable (torn pages included), and the store is
// reopened. Call stopWork between the cut and the reopen: it must stop
// whatever still appends or runs the plugin.
func (e *env) powerCut(stopWork func()) {
	e.t.Helper()
	e.crash.InjectFault(vfs.Fault{Ops: vfs.OpAll &^ (vfs.OpRead | vfs.OpStat | vfs.OpReadDir | vfs.OpOpen), Err: vfs.ErrIO})
	stopWork()
	_ = e.store.Close()
	e.store = nil
	e.crash.Crash()
	e.crash.ClearFaults()
	e.open()
}

var testHost = netip.MustParseAddrPort("127.0.0.1:10911")

// message builds a record with the given key(s) in KEYS.
func message(topic string, qid int32, body, keys string) *record.Message {
	props := map[string]string{"TAGS": "plugintest"}
	if keys != "" {
		props["KEYS"] = keys
	}
	return &record.Message{
		Topic: topic, QueueID: qid, Body: []byte(body),
		Properties: record.EncodeProperties(props),
		BornHost:   testHost, StoreHost: testHost, BornTimestamp: 1,
	}
}

// storedRecord is one record found in a store.
type storedRecord struct {
	off, end int64
	topic    string
	keys     string
	uniq     string
	ts       int64
	body     string
}

func (r storedRecord) hasKey(key string) bool {
	if r.uniq == key {
		return true
	}
	for k := range record.IndexKeys(r.keys) {
		if k == key {
			return true
		}
	}
	return false
}

// scan reads every record in [Min, Committed) of s.
func scan(t testing.TB, s *core.Store) []storedRecord {
	t.Helper()
	p := s.Positions()
	var out []storedRecord
	for off := p.Min; off < p.Committed; {
		b, err := s.ReadLog(off, 1<<20)
		if err != nil {
			t.Fatalf("scan store at %d: %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			n, info, err := record.Check(b, true)
			if err != nil {
				t.Fatalf("scan store at %d: %v", off, err)
			}
			if !info.Blank {
				r := storedRecord{off: off, end: off + int64(n), topic: info.Topic, keys: info.Keys, uniq: info.UniqKey, ts: info.StoreTimestamp}
				if rec, err := record.Decode(b[:n]); err == nil {
					r.body = string(rec.Body)
				}
				out = append(out, r)
			}
			b = b[n:]
			off += int64(n)
		}
	}
	return out
}

// ---------------------------------------------------------------- profiles

// writeProfile writes the minimal profile for section and returns a Config
// for it.
func writeProfile(t testing.TB, section, extra, snippet string) sdk.Config {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "schema = 1\n\n[%s]\nplugin = \"plugintest\"\n%s", section, extra)
	if strings.TrimSpace(snippet) != "" {
		fmt.Fprintf(&b, "\n[%s.config]\n%s\n", section, snippet)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "profile.toml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	return sdk.Config{Name: "plugintest", File: file, Document: []byte(b.String()), Section: section, DataDir: data}
}

// checkRejectsUnknownKey configures p with an unknown key in its config
// table: Configure must fail with an error wrapping sdk.ErrInvalidConfig
// that names the key.
func checkRejectsUnknownKey(t testing.TB, p sdk.Plugin, cfg sdk.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.Configure(ctx, cfg)
	if err == nil {
		t.Fatalf("Configure accepted a profile with the unknown key plugintest_unknown_key in [%s.config]:\n%s", cfg.Section, cfg.Document)
	}
	if !errors.Is(err, sdk.ErrInvalidConfig) {
		t.Fatalf("Configure with an unknown key: error %q does not wrap sdk.ErrInvalidConfig", err)
	}
	if !strings.Contains(err.Error(), "plugintest_unknown_key") {
		t.Errorf("Configure with an unknown key: error %q does not name the key", err)
	}
}

func withUnknownKey(snippet string) string {
	return snippet + "\nplugintest_unknown_key = 1\n"
}

// lifecycle configures and starts p and registers a cleanup that stops it
// unless the test did.
type lifecycle struct {
	t       testing.TB
	p       sdk.Plugin
	stopped atomic.Bool
}

func start(t testing.TB, p sdk.Plugin, cfg sdk.Config, h sdk.Host) *lifecycle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Configure(ctx, cfg); err != nil {
		t.Fatalf("Configure: %v\nprofile:\n%s", err, cfg.Document)
	}
	if err := p.Start(ctx, h); err != nil {
		t.Fatalf("Start: %v", err)
	}
	l := &lifecycle{t: t, p: p}
	t.Cleanup(func() {
		if !l.stopped.Load() {
			l.stop()
		}
	})
	return l
}

// stop calls Stop, which must return nil within 10 s.
func (l *lifecycle) stop() {
	l.t.Helper()
	if l.stopped.Swap(true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	if err := l.p.Stop(ctx); err != nil {
		l.t.Errorf("Stop: %v", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		l.t.Errorf("Stop took %v", d)
	}
}

// crash ends the plugin as a crash would where that is possible (an
// external plugin's process is killed without Stop); an in-process plugin
// is stopped instead.
func (l *lifecycle) crash() {
	if rp, ok := l.p.(interface{ Client() *pluginrpc.Client }); ok {
		l.stopped.Store(true)
		rp.Client().Kill()
		return
	}
	l.stop()
}

// ---------------------------------------------------------------- external plugins

var builds struct {
	sync.Mutex
	dir  string
	bins map[string]string
	errs map[string]error
}

// Build compiles the main package pkg (an import path, or a path relative
// to the test's package directory such as "./cmd/myplugin") with `go
// build` and returns the binary's path. It builds each package once per
// test binary run, into a temporary directory that Main removes.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if bin, ok := builds.bins[pkg]; ok {
		return bin
	}
	if err, ok := builds.errs[pkg]; ok {
		t.Fatal(err)
	}
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "keel-plugintest-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir = d
		builds.bins = map[string]string{}
		builds.errs = map[string]error{}
	}
	bin := filepath.Join(builds.dir, fmt.Sprintf("plugin%d-%s", len(builds.bins)+len(builds.errs), filepath.Base(pkg)))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	begin := time.Now()
	if err := cmd.Run(); err != nil {
		err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out.String())
		builds.errs[pkg] = err
		t.Fatal(err)
	}
	t.Logf("built %s in %v", pkg, time.Since(begin).Round(time.Millisecond))
	builds.bins[pkg] = bin
	return bin
}

// Main runs the tests and removes what Build built. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(plugintest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	builds.Lock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
	builds.Unlock()
	return code
}

// External starts the plugin binary with args and returns its client; the
// process is killed when the test ends. Its logs reach t.Log at warn level
// and above.
func External(t *testing.T, binary string, args ...string) *pluginrpc.Client {
	t.Helper()
	return dial(t, binary, slog.LevelWarn, args)
}

func dial(t *testing.T, binary string, level slog.Level, args []string) *pluginrpc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pluginrpc.Dial(ctx, pluginrpc.DialOptions{Path: binary, Args: args, Logger: testLogger(t, level), SocketDir: t.TempDir()})
	if err != nil {
		t.Fatalf("dial plugin %s: %v", binary, err)
	}
	t.Cleanup(c.Kill)
	return c
}

// ExternalFlush returns a constructor for RunFlush that starts binary (with
// args) once per instance and returns its flush strategy.
func ExternalFlush(binary string, args ...string) func(t *testing.T) sdk.FlushStrategy {
	return func(t *testing.T) sdk.FlushStrategy {
		t.Helper()
		f, err := External(t, binary, args...).FlushStrategy()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
}

// ExternalReplicator returns a constructor for RunReplication that starts
// binary (with args) once per instance and returns its replicator.
func ExternalReplicator(binary string, args ...string) func(t *testing.T) sdk.Replicator {
	return func(t *testing.T) sdk.Replicator {
		t.Helper()
		r, err := External(t, binary, args...).Replicator()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// ExternalIndexer returns a constructor for RunIndex that starts binary
// (with args) once per instance and returns its indexer.
func ExternalIndexer(binary string, args ...string) func(t *testing.T) sdk.Indexer {
	return func(t *testing.T) sdk.Indexer {
		t.Helper()
		x, err := External(t, binary, args...).Indexer()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
}

// ---------------------------------------------------------------- small helpers

// testLogger logs to t.Log at level and above until the test ends (later
// lines, from goroutines that outlive it, are dropped).
func testLogger(t testing.TB, level slog.Level) *slog.Logger {
	h := &tHandler{t: t, level: level, state: &tState{}}
	t.Cleanup(func() {
		h.state.mu.Lock()
		h.state.done = true
		h.state.mu.Unlock()
	})
	return slog.New(h)
}

type tState struct {
	mu   sync.Mutex
	done bool
}

type tHandler struct {
	t     testing.TB
	level slog.Level
	attrs []slog.Attr
	state *tState
}

func (h *tHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *tHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	if !h.state.done {
		h.t.Log(b.String())
	}
	return nil
}

func (h *tHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clip(h.attrs), as...)
	return &c
}

func (h *tHandler) WithGroup(name string) slog.Handler { return h }

// freeAddr returns a 127.0.0.1 address with a port free at the time of the
// call.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// eventually polls cond every few ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recordBody decodes a whole record and returns its body.
func recordBody(b []byte) (string, error) {
	r, err := record.Decode(b)
	if err != nil {
		return "", err
	}
	return string(r.Body), nil
}
