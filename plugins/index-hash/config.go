package indexhash

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
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
	// CleanInterval is how often files whose records have all left the
	// commitlog are deleted; "0s" never (Clean can still be called). A
	// duration string: "10s", "1m".
	CleanInterval config.Duration `toml:"clean_interval"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		HashSlots:      DefaultHashSlots,
		EntriesPerFile: DefaultEntriesPerFile,
		MaxQuery:       DefaultMaxQuery,
		CleanInterval:  config.Duration(DefaultCleanInterval),
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
	for _, p := range c.problems() {
		errs = append(errs, fmt.Errorf("%w: %s: %s", sdk.ErrInvalidConfig, p.key, p.msg))
	}
	return errors.Join(errs...)
}

// problem is a value out of range.
type problem struct{ key, msg string }

func (c Config) problems() []problem {
	var ps []problem
	bad := func(key, format string, args ...any) {
		ps = append(ps, problem{key, fmt.Sprintf(format, args...)})
	}
	if c.HashSlots < 1 || c.HashSlots > 500_000_000 {
		bad("hash_slots", "%d is out of range (1 to 500000000)", c.HashSlots)
	}
	if c.EntriesPerFile < 2 || c.EntriesPerFile > math.MaxInt32 {
		bad("entries_per_file", "%d is out of range (2 to %d)", c.EntriesPerFile, math.MaxInt32)
	}
	if len(ps) == 0 && c.FileSize() > MaxFileSize {
		bad("entries_per_file", "a file of 40 + 4*%d + 20*%d = %d bytes exceeds %d", c.HashSlots, c.EntriesPerFile, c.FileSize(), int64(MaxFileSize))
	}
	if c.MaxQuery < 1 || c.MaxQuery > MaxQueryLimit {
		bad("max_query", "%d is out of range (1 to %d)", c.MaxQuery, MaxQueryLimit)
	}
	if c.CleanInterval < 0 {
		bad("clean_interval", "must not be negative")
	}
	return ps
}

// DecodeConfig decodes the plugin's table (cfg.Section+".config") of
// cfg.Document strictly over DefaultConfig with sdk.Config.Decode, then
// validates the result. An unknown key or a value of the wrong type fails
// with sdk.Config.Decode's error (FILE:LINE:COL, the key's dotted path and
// what is allowed), a value out of range with config.ValueError's, placed
// where the value came from (FILE:LINE:COL of the value, the --set
// override that set it, or FILE alone for a default); both wrap
// sdk.ErrInvalidConfig. Keys outside the plugin's table are not
// its business. An empty Document gives the defaults.
func DecodeConfig(cfg sdk.Config) (Config, error) {
	c := DefaultConfig()
	if cfg.Section == "" {
		cfg.Section = string(sdk.KindIndex)
	}
	if err := cfg.Decode(&c); err != nil {
		if !errors.Is(err, sdk.ErrInvalidConfig) {
			err = fmt.Errorf("%w: %w", sdk.ErrInvalidConfig, err)
		}
		return Config{}, err
	}
	var errs []error
	for _, p := range c.problems() {
		errs = append(errs, cfg.Invalid(p.key, "%s", p.msg))
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}
