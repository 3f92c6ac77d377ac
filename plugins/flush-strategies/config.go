package flushstrategies

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
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
)

// SyncConfig is the [flush.config] of the "sync" strategy.
type SyncConfig struct {
	// Timeout is how long a producer's ack waits for the flush before the
	// host answers FLUSH_DISK_TIMEOUT (the record stays stored). > 0.
	// Default 5s.
	Timeout config.Duration `toml:"timeout" json:"timeout"`
}

// AsyncConfig is the [flush.config] of the "async" strategy.
type AsyncConfig struct {
	// Interval is the flush cadence (a fixed cadence, as RocketMQ's
	// flushCommitLogTimed). > 0. Default 500ms.
	Interval config.Duration `toml:"interval" json:"interval"`
	// LeastPages: a flush happens only when at least LeastPages*4096 bytes
	// are committed but not flushed; 0 flushes whenever anything is. >= 0.
	// Default 4.
	LeastPages int `toml:"least_pages" json:"least_pages"`
	// ThoroughInterval: at least this often, a flush ignores LeastPages.
	// >= Interval. Default 10s.
	ThoroughInterval config.Duration `toml:"thorough_interval" json:"thorough_interval"`
}

// BufferedConfig is the [flush.config] of the "buffered" strategy: the
// commit cadence plus AsyncConfig's flush settings.
type BufferedConfig struct {
	// CommitInterval is how often write-buffered bytes are committed to
	// the files (Host.Commit). > 0. Default 200ms.
	CommitInterval config.Duration `toml:"commit_interval" json:"commit_interval"`
	// Interval, LeastPages, ThoroughInterval: as AsyncConfig.
	Interval         config.Duration `toml:"interval" json:"interval"`
	LeastPages       int             `toml:"least_pages" json:"least_pages"`
	ThoroughInterval config.Duration `toml:"thorough_interval" json:"thorough_interval"`
}

func defaultSyncConfig() SyncConfig { return SyncConfig{Timeout: config.Duration(DefaultTimeout)} }

func defaultAsyncConfig() AsyncConfig {
	return AsyncConfig{
		Interval:         config.Duration(DefaultInterval),
		LeastPages:       DefaultLeastPages,
		ThoroughInterval: config.Duration(DefaultThoroughInterval),
	}
}

func defaultBufferedConfig() BufferedConfig {
	return BufferedConfig{
		CommitInterval:   config.Duration(DefaultCommitInterval),
		Interval:         config.Duration(DefaultInterval),
		LeastPages:       DefaultLeastPages,
		ThoroughInterval: config.Duration(DefaultThoroughInterval),
	}
}

// invalid is sdk.Config.Invalid for the flush section (the section a
// Config without one is configured for).
func invalid(cfg sdk.Config, key, format string, args ...any) error {
	cfg.Section = sectionOf(cfg)
	return cfg.Invalid(key, format, args...)
}

func sectionOf(cfg sdk.Config) string {
	if cfg.Section == "" {
		return string(sdk.KindFlush)
	}
	return cfg.Section
}

func (c SyncConfig) validate(cfg sdk.Config) error {
	if c.Timeout.D() <= 0 {
		return invalid(cfg, "timeout", "%s is not allowed: must be > 0 (e.g. \"5s\")", c.Timeout.D())
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
	return validateFlushKeys(cfg, c.Interval.D(), c.ThoroughInterval.D(), c.LeastPages)
}

func (c BufferedConfig) validate(cfg sdk.Config) error {
	if c.CommitInterval.D() <= 0 {
		return invalid(cfg, "commit_interval", "%s is not allowed: must be > 0 (e.g. \"200ms\")", c.CommitInterval.D())
	}
	return validateFlushKeys(cfg, c.Interval.D(), c.ThoroughInterval.D(), c.LeastPages)
}

// decodeConfig decodes the keys under cfg.Section+".config" (Section
// defaults to "flush") of cfg.Document strictly into out, a pointer to a
// config struct holding the defaults, with sdk.Config.Decode: an unknown
// key or a value of the wrong type is an error wrapping sdk.ErrInvalidConfig
// that names file:line:col, the dotted key and what is allowed. Keys
// elsewhere in the document are not this plugin's business. A document
// without the table leaves out unchanged.
func decodeConfig(cfg sdk.Config, out any) error {
	cfg.Section = sectionOf(cfg)
	if err := cfg.Decode(out); err != nil {
		if !errors.Is(err, sdk.ErrInvalidConfig) {
			// Misuse (an invalid section name) is still a configuration the
			// plugin cannot use.
			return fmt.Errorf("%w: %w", sdk.ErrInvalidConfig, err)
		}
		return err
	}
	return nil
}

// configure decodes cfg strictly over def (a strategy's defaults) and
// validates the result, for a strategy that may still be configured.
func configure[C interface{ validate(sdk.Config) error }](b *base, cfg sdk.Config, def C) (C, error) {
	if err := b.checkConfigurable(); err != nil {
		return def, err
	}
	if err := decodeConfig(cfg, &def); err != nil {
		return def, err
	}
	return def, def.validate(cfg)
}

// CheckConfig implements the host's optional ConfigChecker (`keel profile
// check`) for every strategy: their Configure touches nothing on disk, so
// it is Configure.
func (s *syncStrategy) CheckConfig(ctx context.Context, cfg sdk.Config) error {
	return s.Configure(ctx, cfg)
}

// CheckConfig is Configure; see syncStrategy.CheckConfig.
func (s *asyncStrategy) CheckConfig(ctx context.Context, cfg sdk.Config) error {
	return s.Configure(ctx, cfg)
}

// CheckConfig is Configure; see syncStrategy.CheckConfig.
func (s *bufferedStrategy) CheckConfig(ctx context.Context, cfg sdk.Config) error {
	return s.Configure(ctx, cfg)
}
