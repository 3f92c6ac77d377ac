package sdk

import (
	"errors"

	"github.com/keelmq/keel/sdk/config"
)

// Decode decodes the plugin's own table, <Section>.config of Document, into
// v, a non-nil pointer to the plugin's config struct filled with its
// defaults, strictly: see config.DecodeSection, which it calls with File,
// Document and Section. Use config.Duration, config.Size and config.Ratio
// for durations, sizes and ratios. Keys the table does not set keep v's
// defaults; --set overrides carried in Document are applied.
//
// A problem with the configuration returns an error wrapping
// ErrInvalidConfig (errors.Is) and the *config.Error or config.ErrorList
// describing it (errors.As), whose text is exactly the positioned message,
// for example
//
//	profiles/x.toml:12:12: flush.config.interval: invalid duration "5 parsecs" (want e.g. "500ms", "2s")
//
// so Configure can return it as it is. Misuse (v not a non-nil pointer, an
// invalid Section) returns an error that does not wrap ErrInvalidConfig.
// On error v may be partly written. Safe for concurrent use on different v.
func (c Config) Decode(v any) error {
	err := config.DecodeSection(c.File, c.Document, c.Section, v)
	var one *config.Error
	var many config.ErrorList
	if err != nil && (errors.As(err, &one) || errors.As(err, &many)) {
		return &invalidConfigError{err: err}
	}
	return err
}

// Invalid returns the error for a value of the plugin's own table that the
// plugin's validation rejects after Decode (a value of the right type but
// out of range, or in conflict with another): its text is
// config.ValueError's, placed where the value in force came from —
//
//	profiles/x.toml:12:17: replication.config.wait_replicas: 9 is too many (at most 3)
//	profiles/x.toml: --set replication.config.wait_replicas=9: replication.config.wait_replicas: ...
//	profiles/x.toml: replication.config.wait_replicas: ...   (the default)
//
// — and it matches ErrInvalidConfig and the *config.Error (errors.Is,
// errors.As), as Decode's errors do. key is relative to the table
// ("timeout" for flush.config.timeout, "a.b" for a nested key); format and
// args say what is wrong and what is allowed. A Config without File reads
// as "profile".
func (c Config) Invalid(key, format string, args ...any) error {
	file := c.File
	if file == "" {
		file = "profile"
	}
	return &invalidConfigError{err: config.ValueError(file, c.Document, c.Section, key, format, args...)}
}

// invalidConfigError is a configuration problem: its text is the problem's,
// and it matches both ErrInvalidConfig and the problem.
type invalidConfigError struct{ err error }

func (e *invalidConfigError) Error() string { return e.err.Error() }

func (e *invalidConfigError) Unwrap() []error { return []error{e.err, ErrInvalidConfig} }
