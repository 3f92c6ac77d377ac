package flushstrategies

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/keelmq/keel/sdk"
)

// PageSize is the page granularity of the least-pages thresholds: a
// threshold of N pages is N*PageSize bytes (RocketMQ's OS_PAGE_SIZE).
const PageSize = 4096

// Defaults, matching Apache RocketMQ's MessageStoreConfig.
const (
	// DefaultTimeout is how long a sync-flush ack waits before answering
	// FLUSH_DISK_TIMEOUT (syncFlushTimeout).
	DefaultTimeout = 5 * time.Second
	// DefaultInterval is the async flush cadence (flushIntervalCommitLog).
	DefaultInterval = 500 * time.Millisecond
	// DefaultLeastPages is the dirty-page threshold of an async flush
	// (flushCommitLogLeastPages).
	DefaultLeastPages = 4
	// DefaultThoroughInterval is how often an async flush ignores the
	// threshold and flushes everything (flushCommitLogThoroughInterval).
	DefaultThoroughInterval = 10 * time.Second
	// DefaultCommitInterval is the write-buffer commit cadence
	// (commitIntervalCommitLog).
	DefaultCommitInterval = 200 * time.Millisecond
	// DefaultMaxWait bounds how long the adaptive strategy holds a flush
	// back to grow its batch.
	DefaultMaxWait = 300 * time.Microsecond
	// DefaultIdleGap ends an adaptive wait early when no append arrives
	// for this long.
	DefaultIdleGap = 60 * time.Microsecond
	// DefaultMinPendingBytes is the backlog at which the adaptive strategy
	// starts holding flushes back (a sign that many producers wait).
	DefaultMinPendingBytes = 4096
)

// Duration is a length of time written in a profile as a TOML string with a
// unit: "500ms", "10s", "300us". A bare number is rejected (it has no
// unit), and so is a negative duration.
type Duration struct {
	time.Duration
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	s := string(b)
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			return fmt.Errorf("invalid duration %q: a bare number has no unit (want a string such as \"500ms\" or \"10s\")", s)
		}
		return fmt.Errorf("invalid duration %q (want a string such as \"500ms\" or \"10s\")", s)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler ("500ms").
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// SyncConfig is the [flush.config] of the "sync" strategy.
type SyncConfig struct {
	// Timeout is how long a producer's ack waits for the flush before the
	// host answers FLUSH_DISK_TIMEOUT (the record stays stored). > 0.
	// Default 5s.
	Timeout Duration `toml:"timeout" json:"timeout"`
}

// AdaptiveConfig is the [flush.config] of the "adaptive" strategy.
type AdaptiveConfig struct {
	// Timeout: as SyncConfig.Timeout.
	Timeout Duration `toml:"timeout" json:"timeout"`
	// MaxWait bounds how long a flush is held back to let more producers
	// join its batch. In (0, 100ms]. Default 300us.
	MaxWait Duration `toml:"max_wait" json:"max_wait"`
	// IdleGap ends the hold early when no append arrives for this long.
	// In (0, MaxWait]. Default 60us.
	IdleGap Duration `toml:"idle_gap" json:"idle_gap"`
	// MinPendingBytes: a flush is held back only when at least this many
	// bytes were already waiting when the flusher woke (many producers).
	// >= 1. Default 4096.
	MinPendingBytes int64 `toml:"min_pending_bytes" json:"min_pending_bytes"`
}

// AsyncConfig is the [flush.config] of the "async" strategy.
type AsyncConfig struct {
	// Interval is the flush cadence (a fixed cadence, as RocketMQ's
	// flushCommitLogTimed). > 0. Default 500ms.
	Interval Duration `toml:"interval" json:"interval"`
	// LeastPages: a flush happens only when at least LeastPages*4096 bytes
	// are committed but not flushed; 0 flushes whenever anything is. >= 0.
	// Default 4.
	LeastPages int `toml:"least_pages" json:"least_pages"`
	// ThoroughInterval: at least this often, a flush ignores LeastPages.
	// >= Interval. Default 10s.
	ThoroughInterval Duration `toml:"thorough_interval" json:"thorough_interval"`
}

// BufferedConfig is the [flush.config] of the "buffered" strategy: the
// commit cadence plus AsyncConfig's flush settings.
type BufferedConfig struct {
	// CommitInterval is how often write-buffered bytes are committed to
	// the files (Host.Commit). > 0. Default 200ms.
	CommitInterval Duration `toml:"commit_interval" json:"commit_interval"`
	// Interval, LeastPages, ThoroughInterval: as AsyncConfig.
	Interval         Duration `toml:"interval" json:"interval"`
	LeastPages       int      `toml:"least_pages" json:"least_pages"`
	ThoroughInterval Duration `toml:"thorough_interval" json:"thorough_interval"`
}

func defaultSyncConfig() SyncConfig { return SyncConfig{Timeout: Duration{DefaultTimeout}} }

func defaultAdaptiveConfig() AdaptiveConfig {
	return AdaptiveConfig{
		Timeout:         Duration{DefaultTimeout},
		MaxWait:         Duration{DefaultMaxWait},
		IdleGap:         Duration{DefaultIdleGap},
		MinPendingBytes: DefaultMinPendingBytes,
	}
}

func defaultAsyncConfig() AsyncConfig {
	return AsyncConfig{
		Interval:         Duration{DefaultInterval},
		LeastPages:       DefaultLeastPages,
		ThoroughInterval: Duration{DefaultThoroughInterval},
	}
}

func defaultBufferedConfig() BufferedConfig {
	return BufferedConfig{
		CommitInterval:   Duration{DefaultCommitInterval},
		Interval:         Duration{DefaultInterval},
		LeastPages:       DefaultLeastPages,
		ThoroughInterval: Duration{DefaultThoroughInterval},
	}
}

// invalid returns an error wrapping sdk.ErrInvalidConfig about key of the
// plugin's section.
func invalid(cfg sdk.Config, key, format string, args ...any) error {
	return invalidAt(cfg, []string{sectionOf(cfg), "config", key}, format, args...)
}

// invalidAt is invalid for any dotted key path.
func invalidAt(cfg sdk.Config, path []string, format string, args ...any) error {
	return invalidPos(cfg, path, false, format, args...)
}

// invalidPos is invalidAt pointing at the key itself (atKey) or its value.
func invalidPos(cfg sdk.Config, path []string, atKey bool, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sdk.ErrInvalidConfig, describe(cfg, path, atKey, fmt.Sprintf(format, args...)))
}

// describe formats "file:line:col: dotted.key: msg".
func describe(cfg sdk.Config, path []string, atKey bool, msg string) string {
	where := fileName(cfg)
	if line, col, ok := locate(cfg.Document, path, atKey); ok {
		where = fmt.Sprintf("%s:%d:%d", where, line, col)
	}
	return fmt.Sprintf("%s: %s: %s", where, strings.Join(path, "."), msg)
}

func fileName(cfg sdk.Config) string {
	if cfg.File == "" {
		return "profile"
	}
	return cfg.File
}

// locate returns the line and column (1-based) of the value (or, with
// atKey, the key) of the dotted key path in doc, or ok=false when doc does
// not set it (or does not parse).
func locate(doc []byte, path []string, atKey bool) (line, col int, ok bool) {
	var p unstable.Parser
	p.Reset(doc)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyOf(e.Key())
		case unstable.KeyValue:
			if line, col, ok = locateIn(&p, e, table, path, atKey); ok {
				return line, col, true
			}
		}
	}
	return 0, 0, false
}

func locateIn(p *unstable.Parser, kv *unstable.Node, prefix, path []string, atKey bool) (int, int, bool) {
	full := append(append([]string(nil), prefix...), keyOf(kv.Key())...)
	v := kv.Value()
	if slicesEqual(full, path) {
		n := v
		if atKey {
			it := kv.Key()
			it.Next()
			n = it.Node()
		}
		if n.Raw.Length == 0 {
			return 0, 0, false
		}
		s := p.Shape(n.Raw)
		return s.Start.Line, s.Start.Column, true
	}
	if v.Kind == unstable.InlineTable && len(full) < len(path) && slicesEqual(full, path[:len(full)]) {
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				if l, cl, ok := locateIn(p, c, full, path, atKey); ok {
					return l, cl, true
				}
			}
		}
	}
	return 0, 0, false
}

func keyOf(it unstable.Iterator) []string {
	var k []string
	for it.Next() {
		k = append(k, string(it.Node().Data))
	}
	return k
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sectionOf(cfg sdk.Config) string {
	if cfg.Section == "" {
		return string(sdk.KindFlush)
	}
	return cfg.Section
}

func (c SyncConfig) validate(cfg sdk.Config) error {
	if c.Timeout.Duration <= 0 {
		return invalid(cfg, "timeout", "%s is not allowed: must be > 0 (e.g. \"5s\")", c.Timeout.Duration)
	}
	return nil
}

func (c AdaptiveConfig) validate(cfg sdk.Config) error {
	if err := (SyncConfig{Timeout: c.Timeout}).validate(cfg); err != nil {
		return err
	}
	if c.MaxWait.Duration <= 0 || c.MaxWait.Duration > 100*time.Millisecond {
		return invalid(cfg, "max_wait", "%s is not allowed: must be in (0, 100ms] (e.g. \"300us\")", c.MaxWait.Duration)
	}
	if c.IdleGap.Duration <= 0 || c.IdleGap.Duration > c.MaxWait.Duration {
		return invalid(cfg, "idle_gap", "%s is not allowed: must be in (0, max_wait=%s]", c.IdleGap.Duration, c.MaxWait.Duration)
	}
	if c.MinPendingBytes < 1 {
		return invalid(cfg, "min_pending_bytes", "%d is not allowed: must be >= 1", c.MinPendingBytes)
	}
	return nil
}

func validateFlushKeys(cfg sdk.Config, interval, thorough time.Duration, leastPages int) error {
	if interval <= 0 {
		return invalid(cfg, "interval", "%s is not allowed: must be > 0 (e.g. \"500ms\")", interval)
	}
	if leastPages < 0 || leastPages > 1<<20 {
		return invalid(cfg, "least_pages", "%d is not allowed: must be in [0, 1048576] (4 KiB pages)", leastPages)
	}
	if thorough < interval {
		return invalid(cfg, "thorough_interval", "%s is not allowed: must be >= interval (%s)", thorough, interval)
	}
	return nil
}

func (c AsyncConfig) validate(cfg sdk.Config) error {
	return validateFlushKeys(cfg, c.Interval.Duration, c.ThoroughInterval.Duration, c.LeastPages)
}

func (c BufferedConfig) validate(cfg sdk.Config) error {
	if c.CommitInterval.Duration <= 0 {
		return invalid(cfg, "commit_interval", "%s is not allowed: must be > 0 (e.g. \"200ms\")", c.CommitInterval.Duration)
	}
	return validateFlushKeys(cfg, c.Interval.Duration, c.ThoroughInterval.Duration, c.LeastPages)
}

// decodeConfig decodes the keys under cfg.Section+".config" of cfg.Document
// strictly into out (a pointer to a config struct holding the defaults):
// an unknown key or a value of the wrong type is an error wrapping
// sdk.ErrInvalidConfig that names file:line:col, the dotted key and what is
// allowed. Keys elsewhere in the document are not this plugin's business
// and are ignored. An empty document, or one without the section, leaves
// out unchanged.
//
// It is the one place that knows how the profile is decoded, so it can be
// replaced by the sdk's strict decode helper when that exists.
func decodeConfig(cfg sdk.Config, out any) error {
	if len(bytes.TrimSpace(cfg.Document)) == 0 {
		return nil
	}
	section := sectionOf(cfg)
	var loose map[string]any
	if err := toml.Unmarshal(cfg.Document, &loose); err != nil {
		return describeTOMLError(cfg, err, out)
	}
	sec, ok := loose[section].(map[string]any)
	if !ok {
		if _, present := loose[section]; present {
			return invalidAt(cfg, []string{section}, "must be a table (got %s)", tomlKind(loose[section]))
		}
		return nil
	}
	conf, present := sec["config"]
	if !present {
		return nil
	}
	if m, ok := conf.(map[string]any); ok {
		if err := checkTypes(cfg, m, out); err != nil {
			return err
		}
	} else {
		return invalidAt(cfg, []string{section, "config"}, "must be a table of settings (got %s)", tomlKind(conf))
	}
	// A wrapper that accepts any value for every key but section.config,
	// which is out's type: strict decoding then checks only the plugin's
	// own keys.
	anyT := reflect.TypeOf((*any)(nil)).Elem()
	secFields := []reflect.StructField{{Name: "Config", Type: reflect.TypeOf(out).Elem(), Tag: tag("config")}}
	for i, k := range sortedKeys(sec) {
		if k != "config" {
			secFields = append(secFields, reflect.StructField{Name: "S" + strconv.Itoa(i), Type: anyT, Tag: tag(k)})
		}
	}
	secT := reflect.StructOf(secFields)
	topFields := []reflect.StructField{{Name: "Section", Type: secT, Tag: tag(section)}}
	for i, k := range sortedKeys(loose) {
		if k != section {
			topFields = append(topFields, reflect.StructField{Name: "T" + strconv.Itoa(i), Type: anyT, Tag: tag(k)})
		}
	}
	wrapper := reflect.New(reflect.StructOf(topFields))
	wrapper.Elem().Field(0).Field(0).Set(reflect.ValueOf(out).Elem())
	dec := toml.NewDecoder(bytes.NewReader(cfg.Document))
	dec.DisallowUnknownFields()
	if err := dec.Decode(wrapper.Interface()); err != nil {
		return describeTOMLError(cfg, err, out)
	}
	reflect.ValueOf(out).Elem().Set(wrapper.Elem().Field(0).Field(0))
	return nil
}

func tag(key string) reflect.StructTag {
	return reflect.StructTag("toml:" + strconv.Quote(key))
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var durationType = reflect.TypeOf(Duration{})

// checkTypes checks that each of the plugin's keys in conf has the TOML
// type its field wants, so a mismatch is reported with the key and what is
// allowed. Unknown keys are left to the strict decoder.
func checkTypes(cfg sdk.Config, conf map[string]any, out any) error {
	t := reflect.TypeOf(out).Elem()
	// go-toml matches keys to fields case-insensitively; a profile key
	// must match exactly.
	known := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		k, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		known[k] = true
	}
	var unknown []string
	for _, k := range sortedKeys(conf) {
		if !known[k] {
			unknown = append(unknown, describe(cfg, []string{sectionOf(cfg), "config", k}, true,
				fmt.Sprintf("unknown key (allowed under %s.config: %s)", sectionOf(cfg), allowedKeys(out))))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: %s", sdk.ErrInvalidConfig, strings.Join(unknown, "; "))
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		v, ok := conf[key]
		if !ok {
			continue
		}
		switch {
		case f.Type == durationType:
			if _, ok := v.(string); !ok {
				return invalid(cfg, key, "got %s, want a duration string with a unit such as \"500ms\" or \"10s\"", tomlKind(v))
			}
		case f.Type.Kind() == reflect.Int || f.Type.Kind() == reflect.Int64:
			if _, ok := v.(int64); !ok {
				return invalid(cfg, key, "got %s, want an integer", tomlKind(v))
			}
		}
	}
	return nil
}

// tomlKind names the TOML type of a value decoded into any.
func tomlKind(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case int64:
		return fmt.Sprintf("the integer %d", x)
	case float64:
		return fmt.Sprintf("the float %v", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	}
	return "a date or time"
}

// allowedKeys lists the TOML keys of a config struct type.
func allowedKeys(out any) string {
	t := reflect.TypeOf(out)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var ks []string
	for i := 0; i < t.NumField(); i++ {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); k != "" {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return "none"
	}
	return strings.Join(ks, ", ")
}

// describeTOMLError turns a go-toml error into one wrapping
// sdk.ErrInvalidConfig with file:line:col and the dotted key.
func describeTOMLError(cfg sdk.Config, err error, out any) error {
	file := fileName(cfg)
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		msgs := make([]string, 0, len(sm.Errors))
		for i := range sm.Errors {
			e := &sm.Errors[i]
			row, col := e.Position()
			msgs = append(msgs, fmt.Sprintf("%s:%d:%d: %s: unknown key (allowed under %s.config: %s)",
				file, row, col, strings.Join(e.Key(), "."), sectionOf(cfg), allowedKeys(out)))
		}
		return fmt.Errorf("%w: %s", sdk.ErrInvalidConfig, strings.Join(msgs, "; "))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		key := strings.Join(de.Key(), ".")
		if key != "" {
			key += ": "
		}
		return fmt.Errorf("%w: %s:%d:%d: %s%s", sdk.ErrInvalidConfig, file, row, col, key, strings.TrimPrefix(de.Error(), "toml: "))
	}
	return fmt.Errorf("%w: %s: %s.config: %v (allowed keys: %s)", sdk.ErrInvalidConfig, file, sectionOf(cfg), err, allowedKeys(out))
}
