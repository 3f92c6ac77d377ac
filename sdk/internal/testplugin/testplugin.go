// Package testplugin holds small reference plugins that exercise the sdk's
// glue and the plugintest suites: a group-commit flush strategy, an
// interval flush strategy, an indexer that keeps its index in memory and
// persists it on Sync, and a probe indexer whose queries trigger
// cross-boundary behaviours (errors, host calls, crashes, logs) for tests.
// cmd/testplugin serves any of them as an external plugin binary.
package testplugin

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/keelmq/keel/sdk"
)

// decodeConfig strictly decodes the plugin's [<section>.config] table of
// cfg.Document into v; unknown keys fail with sdk.ErrInvalidConfig.
func decodeConfig(cfg sdk.Config, v any) error {
	var doc map[string]any
	if err := toml.Unmarshal(cfg.Document, &doc); err != nil {
		return fmt.Errorf("%s: %w: %w", cfg.File, sdk.ErrInvalidConfig, err)
	}
	sec, _ := doc[cfg.Section].(map[string]any)
	sub, _ := sec["config"].(map[string]any)
	if sub == nil {
		return nil
	}
	raw, err := toml.Marshal(sub)
	if err != nil {
		return fmt.Errorf("%s: [%s.config]: %w: %w", cfg.File, cfg.Section, sdk.ErrInvalidConfig, err)
	}
	if err := toml.NewDecoder(bytes.NewReader(raw)).DisallowUnknownFields().Decode(v); err != nil {
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) {
			var keys []string
			for _, de := range strict.Errors {
				keys = append(keys, cfg.Section+".config."+strings.Join(de.Key(), "."))
			}
			return fmt.Errorf("%s: unknown keys %s: %w", cfg.File, strings.Join(keys, ", "), sdk.ErrInvalidConfig)
		}
		return fmt.Errorf("%s: [%s.config]: %w: %w", cfg.File, cfg.Section, sdk.ErrInvalidConfig, err)
	}
	return nil
}

type flushConfig struct {
	Interval string `toml:"interval"`
	Timeout  string `toml:"timeout"`
}

// Flush is a flush strategy: Sync (group commit: flush whenever the
// committed offset moves, acks wait for it) or interval (flush every
// Interval, acks do not wait).
type Flush struct {
	Sync     bool
	interval time.Duration
	timeout  time.Duration
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewSyncFlush returns a group-commit flush strategy.
func NewSyncFlush() *Flush { return &Flush{Sync: true} }

// NewAsyncFlush returns an interval flush strategy.
func NewAsyncFlush() *Flush { return &Flush{} }

// Configure implements sdk.Plugin: keys interval and timeout (durations).
func (f *Flush) Configure(ctx context.Context, cfg sdk.Config) error {
	c := flushConfig{Interval: "20ms", Timeout: "5s"}
	if err := decodeConfig(cfg, &c); err != nil {
		return err
	}
	var err error
	if f.interval, err = time.ParseDuration(c.Interval); err != nil || f.interval <= 0 {
		return fmt.Errorf("[%s.config] interval %q: want a positive duration: %w", cfg.Section, c.Interval, sdk.ErrInvalidConfig)
	}
	if f.timeout, err = time.ParseDuration(c.Timeout); err != nil || f.timeout <= 0 {
		return fmt.Errorf("[%s.config] timeout %q: want a positive duration: %w", cfg.Section, c.Timeout, sdk.ErrInvalidConfig)
	}
	return nil
}

// AckPolicy implements sdk.FlushStrategy.
func (f *Flush) AckPolicy() sdk.FlushPolicy {
	return sdk.FlushPolicy{WaitFlush: f.Sync, Timeout: f.timeout}
}

// Start implements sdk.Plugin.
func (f *Flush) Start(_ context.Context, h sdk.Host) error {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	go func() {
		defer close(f.done)
		if f.Sync {
			var last int64 = -1
			for ctx.Err() == nil {
				c, err := h.WaitCommitted(ctx, last)
				if err != nil {
					sleep(ctx, 10*time.Millisecond)
					continue
				}
				if _, err := h.Flush(ctx); err != nil {
					sleep(ctx, 10*time.Millisecond)
					continue
				}
				last = c
			}
			return
		}
		t := time.NewTicker(f.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = h.Flush(ctx)
			}
		}
	}()
	return nil
}

// Stop implements sdk.Plugin.
func (f *Flush) Stop(context.Context) error {
	if f.cancel != nil {
		f.cancel()
		<-f.done
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// entry is one indexed record.
type entry struct {
	Off int64
	TS  int64
}

// MemIndex is an indexer keeping topic+key → entries in memory and writing
// them to DataDir/memindex.gob (atomically) on Sync; Start loads the file.
// Index is idempotent: a batch starting at offset X first drops every entry
// at or beyond X (records are re-dispatched in order from X after a crash,
// and may differ from what was indexed before the cut).
type MemIndex struct {
	mu      sync.Mutex
	dir     string
	keys    map[string][]entry // topic "\x00" key → entries, ascending offsets
	indexed int64
}

// NewMemIndex returns an empty MemIndex.
func NewMemIndex() *MemIndex { return &MemIndex{} }

// Configure implements sdk.Plugin. It accepts no keys.
func (x *MemIndex) Configure(ctx context.Context, cfg sdk.Config) error {
	var c struct{}
	if err := decodeConfig(cfg, &c); err != nil {
		return err
	}
	if cfg.DataDir == "" {
		return fmt.Errorf("mem index needs a data dir: %w", sdk.ErrInvalidConfig)
	}
	x.dir = cfg.DataDir
	return nil
}

func (x *MemIndex) file() string { return filepath.Join(x.dir, "memindex.gob") }

// Start implements sdk.Plugin. It loads the index file, then drops the
// entries at or beyond the log's committed offset: they were synced for
// records a crash then cut from the log, and no re-dispatch will replace
// them until new records reach those offsets.
func (x *MemIndex) Start(ctx context.Context, h sdk.Host) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.keys = map[string][]entry{}
	b, err := os.ReadFile(x.file())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load mem index: %w", err)
	}
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&x.keys); err != nil {
		return fmt.Errorf("load mem index: %w", err)
	}
	pos, err := h.Positions(ctx)
	if err != nil {
		return fmt.Errorf("load mem index: %w", err)
	}
	x.dropFrom(pos.Committed)
	return nil
}

// dropFrom removes every entry at or beyond offset from.
func (x *MemIndex) dropFrom(from int64) {
	for k, es := range x.keys {
		i, _ := slices.BinarySearchFunc(es, from, func(e entry, off int64) int { return cmpInt(e.Off, off) })
		if i < len(es) {
			x.keys[k] = es[:i]
		}
	}
}

// Stop implements sdk.Plugin.
func (x *MemIndex) Stop(context.Context) error { return nil }

// Index implements sdk.Indexer.
func (x *MemIndex) Index(ctx context.Context, batch []sdk.Record) error {
	if len(batch) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropFrom(batch[0].PhysOffset)
	for _, r := range batch {
		add := func(key string) {
			if key == "" {
				return
			}
			k := r.Topic + "\x00" + key
			es := x.keys[k]
			if n := len(es); n > 0 && es[n-1].Off == r.PhysOffset {
				return // the same key twice in one record
			}
			x.keys[k] = append(es, entry{r.PhysOffset, r.StoreTimestamp})
		}
		for key := range strings.FieldsSeq(r.Keys) {
			add(key)
		}
		add(r.UniqKey)
		x.indexed++
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Sync implements sdk.Indexer.
func (x *MemIndex) Sync(ctx context.Context) error {
	x.mu.Lock()
	var buf bytes.Buffer
	err := gob.NewEncoder(&buf).Encode(x.keys)
	x.mu.Unlock()
	if err != nil {
		return fmt.Errorf("sync mem index: %w", err)
	}
	tmp := x.file() + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("sync mem index: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("sync mem index: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync mem index: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sync mem index: %w", err)
	}
	if err := os.Rename(tmp, x.file()); err != nil {
		return fmt.Errorf("sync mem index: %w", err)
	}
	return nil
}

// Query implements sdk.Indexer.
func (x *MemIndex) Query(ctx context.Context, q sdk.Query) ([]int64, error) {
	if q.Max <= 0 {
		return nil, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	es := x.keys[q.Topic+"\x00"+q.Key]
	var out []int64
	for i := len(es) - 1; i >= 0 && len(out) < q.Max; i-- {
		e := es[i]
		if (q.Begin != 0 && e.TS < q.Begin) || (q.End != 0 && e.TS > q.End) {
			continue
		}
		out = append(out, e.Off)
	}
	return out, nil
}

// Indexed counts records passed to Index (re-indexed ones included).
func (x *MemIndex) Indexed() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.indexed
}

// Probe is a MemIndex that also implements sdk.StatusReporter and
// sdk.MetricsWriter, and whose Query reacts to special topics:
//
//   - "__err", key = a sentinel name (unavailable, timeout, invalid_config,
//     offset, not_supported, fenced): returns an error wrapping it, with
//     the text "probe: <name>: " + the sentinel's text.
//   - "__host", key = "positions N": calls Host.Positions N times and
//     returns [elapsed ns]; "readlog-bad": returns Host.ReadLog's error at
//     offset -1 unchanged; "wait A": returns [Host.WaitCommitted(A)];
//     "truncate X": returns [WaitCommitted(-1), then TruncateLog(X) and
//     WaitCommitted(-1) again];
//     "waitn N": calls WaitCommitted N+1 times for offsets already
//     committed and returns [the committed offset];
//     "flush": returns [Host.Flush()].
//   - "__log": logs key through Host.Log (attribute probe=1) and slog at
//     warn (attribute probe=2), then returns nil.
//   - "__exit": exits the process with status 3 (a crash).
//   - "__hang": blocks until ctx ends.
type Probe struct {
	MemIndex
	host sdk.Host
}

// NewProbe returns a Probe.
func NewProbe() *Probe { return &Probe{} }

// Start implements sdk.Plugin.
func (p *Probe) Start(ctx context.Context, h sdk.Host) error {
	p.host = h
	return p.MemIndex.Start(ctx, h)
}

// Sentinels names the sdk errors the probe can return.
var Sentinels = map[string]error{
	"unavailable":    sdk.ErrUnavailable,
	"timeout":        sdk.ErrTimeout,
	"invalid_config": sdk.ErrInvalidConfig,
	"offset":         sdk.ErrOffset,
	"not_supported":  sdk.ErrNotSupported,
	"fenced":         sdk.ErrFenced,
}

// Query implements sdk.Indexer.
func (p *Probe) Query(ctx context.Context, q sdk.Query) ([]int64, error) {
	switch q.Topic {
	case "__err":
		e, ok := Sentinels[q.Key]
		if !ok {
			return nil, fmt.Errorf("probe: plain error %s", q.Key)
		}
		return nil, fmt.Errorf("probe: %s: %w", q.Key, e)
	case "__host":
		f := strings.Fields(q.Key)
		switch {
		case len(f) == 2 && f[0] == "positions":
			n, _ := strconv.Atoi(f[1])
			start := time.Now()
			for i := 0; i < n; i++ {
				if _, err := p.host.Positions(ctx); err != nil {
					return nil, err
				}
			}
			return []int64{int64(time.Since(start))}, nil
		case len(f) == 1 && f[0] == "readlog-bad":
			_, err := p.host.ReadLog(ctx, -1, 100)
			return nil, err
		case len(f) == 2 && f[0] == "wait":
			a, _ := strconv.ParseInt(f[1], 10, 64)
			c, err := p.host.WaitCommitted(ctx, a)
			return []int64{c}, err
		case len(f) == 2 && f[0] == "waitn":
			n, _ := strconv.Atoi(f[1])
			c, err := p.host.WaitCommitted(ctx, -1)
			if err != nil {
				return nil, err
			}
			for i := 0; i < n; i++ {
				if c, err = p.host.WaitCommitted(ctx, c-1); err != nil {
					return nil, err
				}
			}
			return []int64{c}, nil
		case len(f) == 2 && f[0] == "truncate":
			x, _ := strconv.ParseInt(f[1], 10, 64)
			c1, err := p.host.WaitCommitted(ctx, -1)
			if err != nil {
				return nil, err
			}
			if err := p.host.TruncateLog(ctx, x); err != nil {
				return nil, err
			}
			c2, err := p.host.WaitCommitted(ctx, -1)
			return []int64{c1, c2}, err
		case len(f) == 2 && f[0] == "readall":
			// Read the whole log in ReadLog calls of about max bytes:
			// the bytes read and their FNV-64a hash.
			maxBytes, _ := strconv.Atoi(f[1])
			if _, err := p.host.WaitCommitted(ctx, -1); err != nil { // the committed-offset watch runs
				return nil, err
			}
			pos, err := p.host.Positions(ctx)
			if err != nil {
				return nil, err
			}
			h := fnv.New64a()
			var n int64
			for off, c := pos.Min, pos.Committed; off < c; {
				b, err := p.host.ReadLog(ctx, off, maxBytes)
				if err != nil {
					return nil, err
				}
				if len(b) == 0 {
					return nil, fmt.Errorf("probe: ReadLog(%d) empty below committed %d", off, c)
				}
				h.Write(b)
				off += int64(len(b))
				n += int64(len(b))
			}
			return []int64{n, int64(h.Sum64())}, nil
		case len(f) == 1 && f[0] == "flush":
			c, err := p.host.Flush(ctx)
			return []int64{c}, err
		}
		return nil, fmt.Errorf("probe: unknown host op %q", q.Key)
	case "__log":
		p.host.Log(ctx, int(slog.LevelWarn), q.Key, map[string]string{"probe": "1"})
		slog.Warn(q.Key, "probe", "2")
		return nil, nil
	case "__exit":
		os.Exit(3)
	case "__hang":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return p.MemIndex.Query(ctx, q)
}

// Status implements sdk.StatusReporter.
func (p *Probe) Status(ctx context.Context) ([]byte, error) {
	return fmt.Appendf(nil, `{"indexed":%d}`, p.Indexed()), nil
}

// WriteMetrics implements sdk.MetricsWriter.
func (p *Probe) WriteMetrics(ctx context.Context) ([]byte, error) {
	return fmt.Appendf(nil, "probe_indexed_total %d\n", p.Indexed()), nil
}

var (
	_ sdk.FlushStrategy  = (*Flush)(nil)
	_ sdk.Indexer        = (*MemIndex)(nil)
	_ sdk.Indexer        = (*Probe)(nil)
	_ sdk.StatusReporter = (*Probe)(nil)
	_ sdk.MetricsWriter  = (*Probe)(nil)
)
