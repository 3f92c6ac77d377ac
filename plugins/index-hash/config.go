package indexhash

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/pelletier/go-toml/v2"
)

// Defaults, RocketMQ's where it has one (MessageStoreConfig).
const (
	// DefaultHashSlots is RocketMQ's maxHashSlotNum.
	DefaultHashSlots = 5_000_000
	// DefaultEntriesPerFile is RocketMQ's maxIndexNum: a file has room for
	// this many entries, of which entry 0 is never used.
	DefaultEntriesPerFile = 20_000_000
	// DefaultMaxQuery is RocketMQ's maxMsgsNumBatch: the most offsets one
	// query returns.
	DefaultMaxQuery = 64
	// DefaultReadCache is the default read cache size in bytes (64 MiB).
	DefaultReadCache = 64 << 20
	// DefaultCleanInterval is how often index files are checked against
	// the commitlog minimum offset.
	DefaultCleanInterval = 10 * time.Second
)

// Limits on the configuration.
const (
	// MaxFileSize bounds the size of one index file
	// (40 + 4*hash_slots + 20*entries_per_file bytes), 16 GiB.
	MaxFileSize = 16 << 30
	// MaxQueryLimit bounds max_query.
	MaxQueryLimit = 65536
)

// Config is the plugin's configuration, the [index.config] table of a
// profile (Section+".config"):
//
//	[index.config]
//	hash_slots       = 5000000   # slots per index file (RocketMQ maxHashSlotNum)
//	entries_per_file = 20000000  # entries per file (RocketMQ maxIndexNum)
//	max_query        = 64        # most offsets one query returns
//	read_cache       = "64MiB"   # read cache size in bytes; 0 = off
//	clean_interval   = "10s"     # retention check period; "0s" = never
//
// Every key is optional; DefaultConfig gives the defaults.
type Config struct {
	// HashSlots is the number of hash slots of every index file, 1 to
	// 500,000,000. It is fixed for the life of an index directory:
	// reopening a directory with another value fails with ErrInvalidConfig.
	HashSlots int `toml:"hash_slots"`
	// EntriesPerFile is the room for entries in a new index file, counting
	// the unused entry 0, so a file holds EntriesPerFile-1 keys; at least 2.
	// Existing files keep the size they were made with.
	EntriesPerFile int `toml:"entries_per_file"`
	// MaxQuery caps the number of offsets one Query returns (a larger
	// sdk.Query.Max is lowered to it), as RocketMQ's maxMsgsNumBatch caps
	// a query; 1 to MaxQueryLimit.
	MaxQuery int `toml:"max_query"`
	// ReadCache is the size in bytes of the read cache for records fetched
	// by offset (QueryMessages, ByID, ReadRecord); 0 turns it off. A TOML
	// integer (bytes) or a string with a unit: "64MiB", "512KiB", "1GB".
	ReadCache ByteSize `toml:"read_cache"`
	// CleanInterval is how often files whose records have all left the
	// commitlog are deleted; 0 never (Clean can still be called). A
	// duration string: "10s", "1m".
	CleanInterval Duration `toml:"clean_interval"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		HashSlots:      DefaultHashSlots,
		EntriesPerFile: DefaultEntriesPerFile,
		MaxQuery:       DefaultMaxQuery,
		ReadCache:      DefaultReadCache,
		CleanInterval:  Duration(DefaultCleanInterval),
	}
}

// FileSize is the size in bytes of an index file made with c.
func (c Config) FileSize() int64 {
	return headerSize + 4*int64(c.HashSlots) + entrySize*int64(c.EntriesPerFile)
}

// Validate checks the ranges documented on the fields. Errors wrap
// sdk.ErrInvalidConfig and name the key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", sdk.ErrInvalidConfig, key, fmt.Sprintf(format, args...)))
	}
	if c.HashSlots < 1 || c.HashSlots > 500_000_000 {
		bad("hash_slots", "%d is out of range (1 to 500000000)", c.HashSlots)
	}
	if c.EntriesPerFile < 2 || c.EntriesPerFile > math.MaxInt32 {
		bad("entries_per_file", "%d is out of range (2 to %d)", c.EntriesPerFile, math.MaxInt32)
	}
	if len(errs) == 0 && c.FileSize() > MaxFileSize {
		bad("entries_per_file", "a file of 40 + 4*%d + 20*%d = %d bytes exceeds %d", c.HashSlots, c.EntriesPerFile, c.FileSize(), int64(MaxFileSize))
	}
	if c.MaxQuery < 1 || c.MaxQuery > MaxQueryLimit {
		bad("max_query", "%d is out of range (1 to %d)", c.MaxQuery, MaxQueryLimit)
	}
	if c.ReadCache < 0 {
		bad("read_cache", "must not be negative")
	}
	if c.CleanInterval < 0 {
		bad("clean_interval", "must not be negative")
	}
	return errors.Join(errs...)
}

// DecodeConfig decodes the plugin's table (cfg.Section+".config") of
// cfg.Document strictly over DefaultConfig and validates the result. An
// unknown key, a value of the wrong type or out of range fails with an error
// wrapping sdk.ErrInvalidConfig that gives FILE:LINE:COL and the key's
// dotted path. Keys outside the plugin's table are not its business and are
// ignored. An empty Document gives the defaults.
func DecodeConfig(cfg sdk.Config) (Config, error) {
	c := DefaultConfig()
	if err := decodeSection(cfg, &c); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %s.config: %w", profileName(cfg), cfg.Section, err)
	}
	return c, nil
}

func profileName(cfg sdk.Config) string {
	if cfg.File == "" {
		return "<profile>"
	}
	return cfg.File
}

// decodeSection strictly decodes Document's Section.config table into v
// (a pointer to a struct). It is the one place that knows how the profile
// document is laid out, to be replaced by the sdk's strict decoding helper.
func decodeSection(cfg sdk.Config, v any) error {
	if len(bytes.TrimSpace(cfg.Document)) == 0 {
		return nil
	}
	section := cfg.Section
	if section == "" {
		section = string(sdk.KindIndex)
	}
	// The wrapper is struct{ S struct{ Config T `toml:"config"` } `toml:"<section>"` }
	// with the section name chosen at run time.
	inner := reflect.StructOf([]reflect.StructField{{
		Name: "Config", Type: reflect.TypeOf(v).Elem(), Tag: `toml:"config"`,
	}})
	outer := reflect.StructOf([]reflect.StructField{{
		Name: "Section", Type: inner, Tag: reflect.StructTag(`toml:"` + section + `"`),
	}})
	w := reflect.New(outer)
	w.Elem().Field(0).Field(0).Set(reflect.ValueOf(v).Elem())
	dec := toml.NewDecoder(bytes.NewReader(cfg.Document)).DisallowUnknownFields().EnableUnmarshalerInterface()
	err := dec.Decode(w.Interface())
	prefix := []string{section, "config"}
	var strict *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case err == nil:
	case errors.As(err, &strict):
		var errs []error
		for i := range strict.Errors {
			e := &strict.Errors[i]
			k := []string(e.Key())
			if len(k) <= len(prefix) || !equalKey(k[:len(prefix)], prefix) {
				continue // someone else's key
			}
			row, col := e.Position()
			errs = append(errs, fmt.Errorf("%s:%d:%d: %s: unknown key (allowed: %s): %w",
				profileName(cfg), row, col, strings.Join(k, "."), allowedKeys(reflect.TypeOf(v).Elem()), sdk.ErrInvalidConfig))
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	case errors.As(err, &de):
		row, col := de.Position()
		key := strings.Join([]string(de.Key()), ".")
		if key == "" {
			key = section + ".config"
		}
		return fmt.Errorf("%s:%d:%d: %s: %s: %w", profileName(cfg), row, col, key, strings.TrimPrefix(de.Error(), "toml: "), sdk.ErrInvalidConfig)
	default:
		return fmt.Errorf("%s: %s.config: %v: %w", profileName(cfg), section, err, sdk.ErrInvalidConfig)
	}
	reflect.ValueOf(v).Elem().Set(w.Elem().Field(0).Field(0))
	return nil
}

func equalKey(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func allowedKeys(t reflect.Type) string {
	var ks []string
	for f := range t.Fields() {
		if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag != "" && tag != "-" {
			ks = append(ks, tag)
		}
	}
	return strings.Join(ks, ", ")
}

// ByteSize is a number of bytes: a TOML integer, or a string holding a
// decimal number and an optional unit (B, KiB, MiB, GiB, TiB in powers of
// 1024; KB, MB, GB, TB in powers of 1000; case-insensitive), such as
// "64MiB". It is never negative.
type ByteSize int64

// UnmarshalTOML implements go-toml's unstable.Unmarshaler.
func (s *ByteSize) UnmarshalTOML(raw []byte) error {
	text := strings.TrimSpace(string(raw))
	if str, ok := tomlString(text); ok {
		v, err := ParseByteSize(str)
		if err != nil {
			return err
		}
		*s = v
		return nil
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 0, 64)
	if err != nil {
		return fmt.Errorf("invalid size %s: want a whole number of bytes or a string such as \"64MiB\"", text)
	}
	if n < 0 {
		return fmt.Errorf("invalid size %d: must not be negative", n)
	}
	*s = ByteSize(n)
	return nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseByteSize.
func (s *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseByteSize parses a size as ByteSize documents.
func ParseByteSize(str string) (ByteSize, error) {
	t := strings.TrimSpace(str)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{
		"": 1, "b": 1,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	}[unit]
	f, err := strconv.ParseFloat(num, 64)
	if num == "" || err != nil || mult == 0 {
		return 0, fmt.Errorf("invalid size %q: want e.g. \"64MiB\", \"512KiB\" or a whole number of bytes", str)
	}
	v := f * mult
	if v != math.Trunc(v) || v > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes in range", str)
	}
	return ByteSize(v), nil
}

// Duration is a length of time written as a Go duration string ("10s",
// "500ms", "1m"); a bare number (no unit) and negative values are refused.
type Duration time.Duration

// UnmarshalTOML implements go-toml's unstable.Unmarshaler.
func (d *Duration) UnmarshalTOML(raw []byte) error {
	text := strings.TrimSpace(string(raw))
	str, ok := tomlString(text)
	if !ok {
		return fmt.Errorf("invalid duration %s: want a string such as \"10s\" (a bare number has no unit)", text)
	}
	return d.UnmarshalText([]byte(str))
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want e.g. \"10s\", \"500ms\"", text)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", text)
	}
	*d = Duration(v)
	return nil
}

// tomlString returns the contents of a one-line TOML basic or literal
// string.
func tomlString(text string) (string, bool) {
	if len(text) >= 2 && text[0] == '\'' && text[len(text)-1] == '\'' {
		return text[1 : len(text)-1], true
	}
	if len(text) >= 2 && text[0] == '"' && text[len(text)-1] == '"' {
		s, err := strconv.Unquote(text)
		if err != nil {
			return text[1 : len(text)-1], true
		}
		return s, true
	}
	return "", false
}
