package profile

import "github.com/keelmq/keel/sdk/config"

// The value types, the errors and the strict decoder live in sdk/config, so
// that plugins (which must not import host/) use the very same code; these
// aliases keep this package's API as it was.

// Duration is config.Duration: a duration string such as "500ms" or "72h".
type Duration = config.Duration

// Size is config.Size: a byte count, or a string such as "4MiB" or "1GB".
type Size = config.Size

// Ratio is config.Ratio: a fraction in [0, 1], 0.75 or "75%".
type Ratio = config.Ratio

// Error is config.Error: one problem in a profile, with FILE:LINE:COL, the
// key's dotted path and what is allowed.
type Error = config.Error

// ErrorList is config.ErrorList: several problems, in document order.
type ErrorList = config.ErrorList

// ParseDuration parses a profile duration; see config.ParseDuration.
func ParseDuration(s string) (Duration, error) { return config.ParseDuration(s) }

// ParseSize parses a size string; see config.ParseSize.
func ParseSize(s string) (Size, error) { return config.ParseSize(s) }

// ParseRatio parses "0.75" or "75%"; see config.ParseRatio.
func ParseRatio(s string) (Ratio, error) { return config.ParseRatio(s) }

// KeyPosition returns the line and column of the key dottedKey in the TOML
// document doc; see config.KeyPosition.
func KeyPosition(doc []byte, dottedKey string) (line, col int, ok bool) {
	return config.KeyPosition(doc, dottedKey)
}
