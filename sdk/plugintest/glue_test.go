package plugintest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/internal/pluginrpc"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/internal/testplugin"
	"github.com/keelmq/keel/sdk/plugintest"
	"github.com/keelmq/keel/sdk/storehost"
)

// These tests exercise the process-boundary glue itself (sdk.Serve,
// pluginrpc.Dial and the adapters) with the probe plugin of internal/testplugin.

// capture is a slog handler that keeps records.
type capture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *capture) WithAttrs(as []slog.Attr) slog.Handler { return &withAttrs{c, as} }
func (c *capture) WithGroup(string) slog.Handler         { return c }

// find returns the first record with message msg, with its attributes
// (those added by With included).
func (c *capture) find(msg string) (slog.Level, map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recs {
		if r.Message == msg {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			return r.Level, attrs, true
		}
	}
	return 0, nil, false
}

type withAttrs struct {
	*capture
	as []slog.Attr
}

func (w *withAttrs) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(w.as...)
	return w.capture.Handle(ctx, r)
}
func (w *withAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{w.capture, append(slices.Clip(w.as), as...)}
}

// hostEnv is a store with a Host for the probe.
func hostEnv(t testing.TB, logger *slog.Logger) (*core.Store, *storehost.Host) {
	t.Helper()
	s, err := core.Open(core.Options{Dir: t.TempDir(), SegmentSize: 1 << 20, MaxMessageSize: 64 << 10, CQEntriesPerFile: 1024,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return s, storehost.New(s, logger)
}

func appendN(t *testing.T, s *core.Store, n int) {
	t.Helper()
	hp := netip.MustParseAddrPort("127.0.0.1:1")
	for i := 0; i < n; i++ {
		m := &record.Message{Topic: "G", Body: []byte(fmt.Sprint(i)), BornHost: hp, StoreHost: hp,
			Properties: record.EncodeProperties(map[string]string{"KEYS": "k"})}
		if _, err := s.Append(m); err != nil {
			t.Fatal(err)
		}
	}
}

// countingHost counts WaitCommitted calls reaching the host.
type countingHost struct {
	sdk.Host
	waits atomic.Int64
}

func (c *countingHost) WaitCommitted(ctx context.Context, after int64) (int64, error) {
	c.waits.Add(1)
	return c.Host.WaitCommitted(ctx, after)
}

// startProbe dials the probe binary and configures and starts its indexer
// with host.
func startProbe(t *testing.T, h sdk.Host, logger *slog.Logger) (*pluginrpc.Client, *pluginrpc.RemoteIndexer) {
	t.Helper()
	return startProbeLane(t, h, logger, false)
}

// startProbeLane is startProbe, with noLane as pluginrpc.DialOptions.NoLane.
func startProbeLane(t *testing.T, h sdk.Host, logger *slog.Logger, noLane bool) (*pluginrpc.Client, *pluginrpc.RemoteIndexer) {
	t.Helper()
	bin := plugintest.Build(t, testPluginPkg)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := pluginrpc.Dial(ctx, pluginrpc.DialOptions{Path: bin, Args: []string{"probe"}, Logger: logger, SocketDir: t.TempDir(), NoLane: noLane})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	x, err := c.Indexer()
	if err != nil {
		t.Fatal(err)
	}
	cfg := sdk.Config{Name: "probe", Section: "index", Document: []byte("schema = 1\n"), DataDir: t.TempDir()}
	if err := x.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := x.Start(ctx, h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !c.Exited() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := x.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
		}
	})
	return c, x
}

func TestErrorIdentityAcrossBoundary(t *testing.T) {
	_, h := hostEnv(t, nil)
	_, x := startProbe(t, h, nil)
	ctx := context.Background()
	for name, sentinel := range testplugin.Sentinels {
		t.Run(name, func(t *testing.T) {
			_, err := x.Query(ctx, sdk.Query{Topic: "__err", Key: name, Max: 1})
			if !errors.Is(err, sentinel) {
				t.Fatalf("error %v does not match %v", err, sentinel)
			}
			if want := "probe: " + name + ": " + sentinel.Error(); err.Error() != want {
				t.Errorf("text %q, want %q", err, want)
			}
			for other, o := range testplugin.Sentinels {
				if other != name && errors.Is(err, o) {
					t.Errorf("error also matches %s", other)
				}
			}
		})
	}
	_, err := x.Query(ctx, sdk.Query{Topic: "__err", Key: "nothing", Max: 1})
	if err == nil || err.Error() != "probe: plain error nothing" {
		t.Fatalf("plain error: %v", err)
	}
	for name, s := range testplugin.Sentinels {
		if errors.Is(err, s) {
			t.Errorf("plain error matches %s", name)
		}
	}
}

// A host error crosses to the plugin and back and is still ErrOffset.
func TestHostErrorRoundTrip(t *testing.T) {
	_, h := hostEnv(t, nil)
	_, x := startProbe(t, h, nil)
	_, err := x.Query(context.Background(), sdk.Query{Topic: "__host", Key: "readlog-bad", Max: 1})
	if !errors.Is(err, sdk.ErrOffset) {
		t.Fatalf("host ReadLog error after two crossings: %v, want ErrOffset", err)
	}
	_, direct := h.ReadLog(context.Background(), -1, 100)
	if err.Error() != direct.Error() {
		t.Errorf("text changed: %q, host said %q", err, direct)
	}
}

// WaitCommitted is served from the streamed cache: a thousand waits for
// offsets already committed cost no call to the host, and a wait for a
// new offset returns once an append commits it.
func TestWaitCommittedStreamed(t *testing.T) {
	s, sh := hostEnv(t, nil)
	h := &countingHost{Host: sh}
	_, x := startProbe(t, h, nil)
	appendN(t, s, 10)
	ctx := context.Background()
	c0 := s.Positions().Committed
	res, err := x.Query(ctx, sdk.Query{Topic: "__host", Key: "waitn 1000", Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != c0 {
		t.Fatalf("WaitCommitted answered %d, committed is %d", res[0], c0)
	}
	if n := h.waits.Load(); n > 3 {
		t.Errorf("1001 WaitCommitted calls in the plugin reached the host %d times", n)
	}
	got := make(chan []int64, 1)
	go func() {
		r, err := x.Query(ctx, sdk.Query{Topic: "__host", Key: fmt.Sprintf("wait %d", c0), Max: 1})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("WaitCommitted(%d) returned %v before anything was appended", c0, r)
	default:
	}
	appendN(t, s, 1)
	select {
	case r := <-got:
		if r[0] <= c0 || r[0] > s.Positions().Committed {
			t.Fatalf("WaitCommitted(%d) = %d, committed %d", c0, r[0], s.Positions().Committed)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitCommitted did not return after an append")
	}
	// Many appends: the host-side stream coalesces, so it wakes far fewer
	// times than records were appended while the plugin waits for the last.
	before := h.waits.Load()
	appendN(t, s, 2000)
	end := s.Positions().Committed
	if _, err := x.Query(ctx, sdk.Query{Topic: "__host", Key: fmt.Sprintf("wait %d", end-1), Max: 1}); err != nil {
		t.Fatal(err)
	}
	t.Logf("2000 appends woke the host-side stream %d times", h.waits.Load()-before)
}

// After TruncateLog the plugin's cached committed offset is not stale.
func TestWaitCommittedAfterTruncate(t *testing.T) {
	s, h := hostEnv(t, nil)
	_, x := startProbe(t, h, nil)
	appendN(t, s, 10)
	end := s.Positions().Committed
	cut := s.Positions().Min
	b, err := s.ReadLog(cut, 1)
	if err != nil {
		t.Fatal(err)
	}
	cut += int64(len(b)) // the end of the first record
	res, err := x.Query(context.Background(), sdk.Query{Topic: "__host", Key: fmt.Sprintf("truncate %d", cut), Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != end || res[1] != cut {
		t.Fatalf("WaitCommitted before and after truncating %d to %d: %v", end, cut, res)
	}
	if c := s.Positions().Committed; c != cut {
		t.Fatalf("store committed %d after TruncateLog(%d)", c, cut)
	}
}

func TestOptionalInterfaces(t *testing.T) {
	_, h := hostEnv(t, nil)
	c, x := startProbe(t, h, nil)
	ctx := context.Background()
	if err := x.Index(ctx, []sdk.Record{{Topic: "T", Keys: "a b", PhysOffset: 0, Size: 10}, {Topic: "T", Keys: "a", PhysOffset: 10, Size: 10}}); err != nil {
		t.Fatal(err)
	}
	st, err := x.Status(ctx)
	if err != nil || string(st) != `{"indexed":2}` {
		t.Fatalf("Status: %s, %v", st, err)
	}
	m, err := x.WriteMetrics(ctx)
	if err != nil || string(m) != "probe_indexed_total 2\n" {
		t.Fatalf("WriteMetrics: %q, %v", m, err)
	}
	offs, err := x.Query(ctx, sdk.Query{Topic: "T", Key: "a", Max: 10})
	if err != nil || !slices.Equal(offs, []int64{10, 0}) {
		t.Fatalf("Query: %v, %v", offs, err)
	}
	if !slices.Equal(c.Kinds(), []sdk.Kind{sdk.KindIndex}) {
		t.Errorf("Kinds %v", c.Kinds())
	}
	if _, err := c.FlushStrategy(); !errors.Is(err, sdk.ErrNotSupported) {
		t.Errorf("FlushStrategy of an indexer binary: %v", err)
	}
	if _, err := c.Replicator(); !errors.Is(err, sdk.ErrNotSupported) {
		t.Errorf("Replicator of an indexer binary: %v", err)
	}

	// A plugin without the optional interfaces answers ErrNotSupported.
	plain := plugintest.External(t, plugintest.Build(t, testPluginPkg), "mem-index")
	px, err := plain.Indexer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := px.Status(ctx); !errors.Is(err, sdk.ErrNotSupported) {
		t.Errorf("Status of a plugin without it: %v", err)
	}
	if _, err := px.WriteMetrics(ctx); !errors.Is(err, sdk.ErrNotSupported) {
		t.Errorf("WriteMetrics of a plugin without it: %v", err)
	}
}

func TestLogsForwarded(t *testing.T) {
	hostLog, dialLog := &capture{}, &capture{}
	_, h := hostEnv(t, slog.New(hostLog))
	_, x := startProbe(t, h, slog.New(dialLog))
	if _, err := x.Query(context.Background(), sdk.Query{Topic: "__log", Key: "hello from the probe", Max: 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l1, a1, ok1 := hostLog.find("hello from the probe")
		l2, a2, ok2 := dialLog.find("hello from the probe")
		if ok1 && ok2 {
			if l1 != slog.LevelWarn || a1["probe"] != "1" {
				t.Errorf("Host.Log line: level %v attrs %v", l1, a1)
			}
			if l2 != slog.LevelWarn || a2["probe"] != "2" {
				t.Errorf("plugin slog line: level %v attrs %v", l2, a2)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log lines not forwarded: via Host.Log %v, via stderr %v", ok1, ok2)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCrashDetection(t *testing.T) {
	_, h := hostEnv(t, nil)
	c, x := startProbe(t, h, nil)
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	_, err := x.Query(context.Background(), sdk.Query{Topic: "__exit", Max: 1})
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("call that crashed the plugin: %v, want ErrUnavailable", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the plugin exited")
	}
	t.Logf("crash detected after %v", time.Since(begin))
	if !c.Exited() {
		t.Error("Exited false after the crash")
	}
	if _, err := x.Query(context.Background(), sdk.Query{Topic: "T", Key: "k", Max: 1}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("call after the crash: %v, want ErrUnavailable", err)
	}
	if err := c.Ping(); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("Ping after the crash: %v", err)
	}
}

func TestHungCallEndsWithContext(t *testing.T) {
	_, h := hostEnv(t, nil)
	_, x := startProbe(t, h, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := x.Query(ctx, sdk.Query{Topic: "__hang", Max: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung call: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("hung call returned after %v", d)
	}
}

func TestKill(t *testing.T) {
	c := plugintest.External(t, plugintest.Build(t, testPluginPkg), "mem-index")
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	if c.Pid() <= 0 || c.Pid() == os.Getpid() {
		t.Errorf("pid %d", c.Pid())
	}
	c.Kill()
	if !c.Exited() {
		t.Error("Exited false after Kill")
	}
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Error("Done not closed after Kill")
	}
	c.Kill() // idempotent
}

func TestDialChecks(t *testing.T) {
	bin := plugintest.Build(t, testPluginPkg)
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	hsh := sha256.New()
	_, err = io.Copy(hsh, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	sum := hex.EncodeToString(hsh.Sum(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	dial := func(path, pin string, args ...string) (*pluginrpc.Client, error) {
		c, err := pluginrpc.Dial(ctx, pluginrpc.DialOptions{Path: path, SHA256: pin, Args: args, Logger: quiet, SocketDir: t.TempDir()})
		if c != nil {
			t.Cleanup(c.Kill)
		}
		return c, err
	}
	if _, err := dial(bin, sum, "mem-index"); err != nil {
		t.Errorf("dial with the right pin: %v", err)
	}
	wrong := strings.Repeat("0", 64)
	if _, err := dial(bin, wrong, "mem-index"); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("dial with a wrong pin: %v", err)
	}
	if _, err := dial(bin, "abc", "mem-index"); err == nil {
		t.Error("dial with a malformed pin succeeded")
	}
	if _, err := dial(filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Error("dial of a missing binary succeeded")
	}
	// A binary that is not a plugin (the probe without a valid argument
	// exits at once).
	if _, err := dial(bin, "", "no-such-plugin"); err == nil {
		t.Error("dial of a binary that exits at once succeeded")
	}
	// Dial respects its context.
	short, cancel2 := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel2()
	time.Sleep(time.Millisecond)
	if _, err := pluginrpc.Dial(short, pluginrpc.DialOptions{Path: bin, Args: []string{"mem-index"}, Logger: quiet}); err == nil {
		t.Error("dial with an expired context succeeded")
	}
}

// TestHostCallsTakeTheLane: a started external plugin makes its Host
// calls over the lane the host offered (package internal/pluginlane), and
// with DialOptions.NoLane over gRPC alone, with the same answers.
func TestHostCallsTakeTheLane(t *testing.T) {
	for _, noLane := range []bool{false, true} {
		t.Run(fmt.Sprintf("noLane=%v", noLane), func(t *testing.T) {
			s, h := hostEnv(t, nil)
			appendN(t, s, 3)
			logs := &capture{}
			_, x := startProbeLane(t, h, slog.New(logs), noLane)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := x.Query(ctx, sdk.Query{Topic: "__host", Key: "positions 10", Max: 1}); err != nil {
				t.Fatal(err)
			}
			if _, _, warned := logs.find("plugin lane unavailable: Host calls use gRPC"); warned {
				t.Error("the plugin could not use the lane")
			}
			got := x.LaneCalls()
			if noLane && got != 0 {
				t.Errorf("NoLane: %d calls over a lane", got)
			}
			if !noLane && got < 10 {
				t.Errorf("%d Host calls over the lane, want at least the probe's 10", got)
			}
		})
	}
}

// readLogCounter counts ReadLog calls reaching the host.
type readLogCounter struct {
	*storehost.Host
	reads atomic.Int64
}

func (c *readLogCounter) ReadLog(ctx context.Context, from int64, maxBytes int) ([]byte, error) {
	c.reads.Add(1)
	return c.Host.ReadLog(ctx, from, maxBytes)
}

// logDigest reads s's whole log as the probe's "readall" does: the bytes
// and their FNV-64a hash.
func logDigest(t *testing.T, s *core.Store, maxBytes int) []int64 {
	t.Helper()
	h := fnv.New64a()
	var n int64
	for off, c := s.Positions().Min, s.Positions().Committed; off < c; {
		b, err := s.ReadLog(off, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
		off += int64(len(b))
		n += int64(len(b))
	}
	return []int64{n, int64(h.Sum64())}
}

// TestReadLogFromSegmentFiles: with the lane, an external plugin's
// ReadLog reads the store's segment files itself (no ReadLog call reaches
// the host) and gets exactly the store's bytes, across segments and after
// a truncation rewrote the tail; with NoLane every read is a call.
func TestReadLogFromSegmentFiles(t *testing.T) {
	for _, noLane := range []bool{false, true} {
		t.Run(fmt.Sprintf("noLane=%v", noLane), func(t *testing.T) {
			s, sh := hostEnv(t, nil)
			h := &readLogCounter{Host: sh}
			hp := netip.MustParseAddrPort("127.0.0.1:1")
			add := func(n int, body string) {
				for i := 0; i < n; i++ {
					m := &record.Message{Topic: "G", Body: []byte(fmt.Sprintf("%s-%d-%s", body, i, strings.Repeat("x", i%700))), BornHost: hp, StoreHost: hp}
					if _, err := s.Append(m); err != nil {
						t.Fatal(err)
					}
				}
			}
			add(6000, "a") // about 2.3 MiB: three 1 MiB segments
			_, x := startProbeLane(t, h, nil, noLane)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			readAll := func(maxBytes int) []int64 {
				t.Helper()
				got, err := x.Query(ctx, sdk.Query{Topic: "__host", Key: fmt.Sprintf("readall %d", maxBytes), Max: 2})
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			for _, maxBytes := range []int{1, 4096, 256 << 10} {
				before := h.reads.Load()
				if got, want := readAll(maxBytes), logDigest(t, s, maxBytes); !slices.Equal(got, want) {
					t.Fatalf("max %d: the plugin read %v, the store holds %v", maxBytes, got, want)
				}
				calls := h.reads.Load() - before
				if !noLane && calls != 0 {
					t.Errorf("max %d: %d ReadLog calls reached the host; the segment files were not read", maxBytes, calls)
				}
				if noLane && calls == 0 {
					t.Errorf("max %d: NoLane, yet no ReadLog call reached the host", maxBytes)
				}
			}
			// Cut the log back into its second segment, write different
			// records over the cut, and read again.
			cut, err := s.ReadLog(s.Positions().Min, 1<<20+1)
			if err != nil {
				t.Fatal(err)
			}
			at := s.Positions().Min + int64(len(cut))
			if _, err := x.Query(ctx, sdk.Query{Topic: "__host", Key: fmt.Sprintf("truncate %d", at+int64(len(mustRead(t, s, at)))), Max: 2}); err != nil {
				t.Fatal(err)
			}
			add(3000, "b")
			if got, want := readAll(64<<10), logDigest(t, s, 64<<10); !slices.Equal(got, want) {
				t.Fatalf("after the truncation the plugin read %v, the store holds %v", got, want)
			}
		})
	}
}

// mustRead is the record at off.
func mustRead(t *testing.T, s *core.Store, off int64) []byte {
	t.Helper()
	b, err := s.ReadLog(off, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// storeWaitCounter counts WaitCommitted calls reaching a storehost.Host
// (which can mirror its committed offset, so the plugin gets a page).
type storeWaitCounter struct {
	*storehost.Host
	waits atomic.Int64
}

func (c *storeWaitCounter) WaitCommitted(ctx context.Context, after int64) (int64, error) {
	c.waits.Add(1)
	return c.Host.WaitCommitted(ctx, after)
}

// TestWaitCommittedFromTheCommittedPage: with the lane, the host offers
// its committed-offset page, and a plugin's WaitCommitted past what it
// last learnt is answered from it, with no call reaching the host, while
// the log grows; a wait past the end is still a call that returns when
// the log grows.
func TestWaitCommittedFromTheCommittedPage(t *testing.T) {
	s, sh := hostEnv(t, nil)
	h := &storeWaitCounter{Host: sh}
	appendN(t, s, 3)
	_, x := startProbeLane(t, h, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wait := func(after int64) int64 {
		t.Helper()
		got, err := x.Query(ctx, sdk.Query{Topic: "__host", Key: fmt.Sprintf("wait %d", after), Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	for i := 0; i < 5; i++ {
		before := s.Positions().Committed
		appendN(t, s, 2)
		calls := h.waits.Load()
		if got, want := wait(before), s.Positions().Committed; got != want {
			t.Fatalf("WaitCommitted(%d) = %d, the store committed %d", before, got, want)
		}
		if n := h.waits.Load() - calls; n != 0 {
			t.Fatalf("round %d: a wait the page answers made %d WaitCommitted calls to the host", i, n)
		}
	}
	end := s.Positions().Committed
	done := make(chan int64, 1)
	go func() { done <- wait(end) }()
	time.Sleep(50 * time.Millisecond)
	appendN(t, s, 1)
	if got := <-done; got != s.Positions().Committed {
		t.Fatalf("WaitCommitted(%d) past the end = %d, want %d", end, got, s.Positions().Committed)
	}
	if h.waits.Load() == 0 {
		t.Fatal("a wait past the end made no call to the host")
	}
}
