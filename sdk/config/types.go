package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"
)

// This file holds the value types a profile and a plugin's config struct
// use for durations, byte sizes and ratios.
//
// Each type implements three decoding interfaces:
//
//   - unstable.Unmarshaler (UnmarshalTOML). DecodeSection and Source.Decode
//     enable it, so the type sees the raw TOML value and can tell the string
//     "5s" from the bare number 5. This is the strict path: every value is
//     checked.
//   - encoding.TextUnmarshaler (UnmarshalText), for any other decoder and for
//     command-line flags. It sees only text, so it cannot tell a string from a
//     number; decoders that route TOML integers straight into integer kinds
//     (go-toml without EnableUnmarshalerInterface) bypass it for numbers.
//   - encoding.TextMarshaler where a string is the canonical TOML form.

// Duration is a length of time written in a profile as a Go duration string:
// "500ms", "2s", "1m30s", "72h". Valid units are ns, us (or µs), ms, s, m, h;
// there is no day unit. A bare number is rejected (it has no unit), and so is a
// negative duration. The zero value is 0, which a field may give a meaning such
// as "disabled"; that is the field's own contract.
//
// Duration converts to time.Duration with D() or time.Duration(d).
type Duration time.Duration

// durationHint lists examples of valid durations for error messages.
const durationHint = `want e.g. "500ms", "2s"`

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d in the largest unit that represents it exactly: "72h",
// "90s", "500ms", "1500us", "0s". ParseDuration(d.String()) == d for every
// non-negative d.
func (d Duration) String() string {
	n := int64(d)
	if n == 0 {
		return "0s"
	}
	units := []struct {
		name string
		size int64
	}{
		{"h", int64(time.Hour)},
		{"m", int64(time.Minute)},
		{"s", int64(time.Second)},
		{"ms", int64(time.Millisecond)},
		{"us", int64(time.Microsecond)},
	}
	for _, u := range units {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "ns"
}

// MarshalText implements encoding.TextMarshaler with String's format.
func (d Duration) MarshalText() ([]byte, error) {
	if d < 0 {
		return nil, fmt.Errorf("negative duration %s cannot be written to a profile", time.Duration(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: it parses text with
// ParseDuration. On error d is unchanged.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// UnmarshalTOML implements unstable.Unmarshaler: raw must be a TOML string
// holding a valid duration. A TOML number gets an error that says a unit is
// missing; any other kind gets an error naming the kind. On error d is
// unchanged.
func (d *Duration) UnmarshalTOML(raw []byte) error {
	kind, text, ok := scalarOf(raw)
	switch {
	case ok && kind == unstable.String:
		return d.UnmarshalText([]byte(text))
	case ok && (kind == unstable.Integer || kind == unstable.Float):
		return fmt.Errorf("invalid duration %s: a bare number has no unit (%s; quote it)", text, durationHint)
	default:
		return fmt.Errorf("invalid duration: got %s (%s)", kindName(kind, ok), durationHint)
	}
}

// ParseDuration parses a profile duration (see Duration). Errors say what was
// wrong and give examples of valid values.
func ParseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		t := strings.TrimSpace(s)
		switch {
		case t == "":
			return 0, fmt.Errorf("invalid duration %q: empty (%s)", s, durationHint)
		case isDecimal(t):
			return 0, fmt.Errorf("invalid duration %q: a bare number has no unit (%s)", s, durationHint)
		case strings.HasSuffix(t, "d") && isDecimal(strings.TrimSuffix(t, "d")):
			return 0, fmt.Errorf("invalid duration %q: there is no day unit (use hours, e.g. \"72h\")", s)
		}
		return 0, fmt.Errorf("invalid duration %q (%s)", s, durationHint)
	}
	if v < 0 {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	return Duration(v), nil
}

// Size is a number of bytes. In a profile it is either a TOML integer (a plain
// byte count) or a string: a decimal number, optionally with a fraction, and
// an optional unit, with optional spaces between them. Units, case-insensitive:
//
//	B                          1
//	KiB, MiB, GiB, TiB         powers of 1024 (binary)
//	KB, MB, GB, TB             powers of 1000 (decimal, as in SI)
//
// So "4MiB" is 4194304 and "4MB" is 4000000. A fraction is allowed when the
// result is a whole number of bytes ("1.5GiB" is 1610612736; "1.5B" is
// rejected). A string without a unit is a byte count ("0", "4096"). Sizes are
// never negative and at most math.MaxInt64.
type Size int64

// sizeHint lists examples of valid sizes for error messages.
const sizeHint = `want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes`

var sizeUnits = []struct {
	name string
	mult int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
	{"B", 1},
}

// Bytes returns s as an int64 byte count.
func (s Size) Bytes() int64 { return int64(s) }

// String formats s exactly in the largest binary unit that divides it, else
// the largest decimal unit, else bytes: "1GiB", "1536MiB", "4KiB", "4MB",
// "1001B", "0B". ParseSize(s.String()) == s for every non-negative s.
func (s Size) String() string {
	n := int64(s)
	if n == 0 {
		return "0B"
	}
	for _, u := range sizeUnits { // binary units first, then decimal, then B
		if n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	panic("unreachable: every size is a whole number of bytes")
}

// MarshalText implements encoding.TextMarshaler with String's format.
func (s Size) MarshalText() ([]byte, error) {
	if s < 0 {
		return nil, fmt.Errorf("negative size %d cannot be written to a profile", int64(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseSize. On error
// s is unchanged.
func (s *Size) UnmarshalText(text []byte) error {
	v, err := ParseSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// UnmarshalTOML implements unstable.Unmarshaler: raw must be a TOML string
// accepted by ParseSize or a non-negative TOML integer (a byte count). On
// error s is unchanged.
func (s *Size) UnmarshalTOML(raw []byte) error {
	kind, text, ok := scalarOf(raw)
	switch {
	case ok && kind == unstable.String:
		return s.UnmarshalText([]byte(text))
	case ok && kind == unstable.Integer:
		n, err := parseTOMLInt(text)
		if err != nil {
			return fmt.Errorf("invalid size %s: %v (%s)", text, err, sizeHint)
		}
		if n < 0 {
			return fmt.Errorf("invalid size %s: must not be negative", text)
		}
		*s = Size(n)
		return nil
	case ok && kind == unstable.Float:
		return fmt.Errorf("invalid size %s: a byte count is a whole number (%s)", text, sizeHint)
	default:
		return fmt.Errorf("invalid size: got %s (%s)", kindName(kind, ok), sizeHint)
	}
}

// ParseSize parses a size string (see Size). Errors say what was wrong and
// give examples of valid values.
func ParseSize(str string) (Size, error) {
	t := strings.TrimSpace(str)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if num == "" {
		if strings.HasPrefix(t, "-") {
			return 0, fmt.Errorf("invalid size %q: must not be negative", str)
		}
		return 0, fmt.Errorf("invalid size %q (%s)", str, sizeHint)
	}
	if !isDecimalFraction(num) {
		return 0, fmt.Errorf("invalid size %q: malformed number %q (%s)", str, num, sizeHint)
	}
	mult := int64(1)
	if unit != "" {
		found := false
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				mult, found = u.mult, true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("invalid size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB = powers of 1000)", str, unit)
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q (%s)", str, sizeHint)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", str)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("invalid size %q: too large (at most %d bytes)", str, int64(math.MaxInt64))
	}
	return Size(n.Int64()), nil
}

// Ratio is a fraction in [0, 1]. In a profile it is a TOML number (0.75, or
// the integers 0 and 1) or a string: a number ("0.75") or a percentage in
// [0%, 100%] ("75%"). NaN and infinities are rejected. Ratio has no
// MarshalText: profiles write it as a TOML float.
type Ratio float64

// ratioHint lists examples of valid ratios for error messages.
const ratioHint = `want a number between 0 and 1 such as 0.75, or a percentage such as "75%"`

// F returns r as a float64.
func (r Ratio) F() float64 { return float64(r) }

// UnmarshalText implements encoding.TextUnmarshaler with ParseRatio. On error
// r is unchanged.
func (r *Ratio) UnmarshalText(text []byte) error {
	v, err := ParseRatio(string(text))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// UnmarshalTOML implements unstable.Unmarshaler: raw must be a TOML number in
// [0, 1] or a string accepted by ParseRatio. On error r is unchanged.
func (r *Ratio) UnmarshalTOML(raw []byte) error {
	kind, text, ok := scalarOf(raw)
	switch {
	case ok && kind == unstable.String:
		return r.UnmarshalText([]byte(text))
	case ok && (kind == unstable.Integer || kind == unstable.Float):
		f, err := parseTOMLFloat(kind, text)
		if err != nil {
			return fmt.Errorf("invalid ratio %s (%s)", text, ratioHint)
		}
		if !(f >= 0 && f <= 1) {
			return fmt.Errorf("invalid ratio %s: out of range (%s)", text, ratioHint)
		}
		*r = Ratio(f)
		return nil
	default:
		return fmt.Errorf("invalid ratio: got %s (%s)", kindName(kind, ok), ratioHint)
	}
}

// ParseRatio parses "0.75" or "75%" (see Ratio).
func ParseRatio(s string) (Ratio, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	if pct {
		t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	}
	if !isDecimalFraction(t) {
		return 0, fmt.Errorf("invalid ratio %q (%s)", s, ratioHint)
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid ratio %q (%s)", s, ratioHint)
	}
	if pct {
		f /= 100
	}
	if !(f >= 0 && f <= 1) {
		return 0, fmt.Errorf("invalid ratio %q: out of range (%s)", s, ratioHint)
	}
	return Ratio(f), nil
}

// isDecimal reports whether s is a non-empty run of ASCII digits.
func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isDecimalFraction reports whether s is digits, optionally followed by '.'
// and more digits.
func isDecimalFraction(s string) bool {
	whole, frac, hasDot := strings.Cut(s, ".")
	if !isDecimal(whole) {
		return false
	}
	return !hasDot || isDecimal(frac)
}

// parseTOMLInt parses the text of a TOML integer (decimal with underscores,
// 0x, 0o, 0b prefixes, optional sign).
func parseTOMLInt(text string) (int64, error) {
	n, err := strconv.ParseInt(text, 0, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, errors.New("out of range")
		}
		return 0, errors.New("malformed integer")
	}
	return n, nil
}

// parseTOMLFloat parses the text of a TOML integer or float as a float64,
// rejecting inf and nan.
func parseTOMLFloat(kind unstable.Kind, text string) (float64, error) {
	if kind == unstable.Integer {
		n, err := parseTOMLInt(text)
		return float64(n), err
	}
	clean := strings.ReplaceAll(text, "_", "")
	f, err := strconv.ParseFloat(clean, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a finite number")
	}
	return f, nil
}

// scalarOf parses raw, the bytes of one TOML value as go-toml hands them to
// UnmarshalTOML, and returns its kind and its text: the unescaped content of
// a string, the literal text of a number or boolean. ok is false when raw is
// not a single value (for example the body of a table).
func scalarOf(raw []byte) (kind unstable.Kind, text string, ok bool) {
	doc := make([]byte, 0, len(raw)+4)
	doc = append(doc, "v = "...)
	doc = append(doc, raw...)
	var p unstable.Parser
	p.Reset(doc)
	if !p.NextExpression() {
		return unstable.Invalid, "", false
	}
	e := p.Expression()
	if e.Kind != unstable.KeyValue {
		return unstable.Invalid, "", false
	}
	v := e.Value()
	kind, text = v.Kind, string(v.Data)
	if p.NextExpression() || p.Error() != nil {
		return unstable.Invalid, "", false
	}
	return kind, text, true
}

// kindName names a TOML value kind for error messages, with an article.
func kindName(k unstable.Kind, ok bool) string {
	if !ok {
		return "a table"
	}
	switch k {
	case unstable.String:
		return "a string"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Bool:
		return "a boolean"
	case unstable.Array:
		return "an array"
	case unstable.InlineTable, unstable.Table:
		return "a table"
	case unstable.ArrayTable:
		return "an array of tables"
	case unstable.DateTime, unstable.LocalDate, unstable.LocalDateTime, unstable.LocalTime:
		return "a date/time"
	default:
		return "a " + k.String()
	}
}
