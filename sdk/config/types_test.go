package config

import (
	"encoding"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"
	"pgregory.net/rapid"
)

var (
	_ encoding.TextUnmarshaler = (*Duration)(nil)
	_ encoding.TextMarshaler   = Duration(0)
	_ unstable.Unmarshaler     = (*Duration)(nil)
	_ encoding.TextUnmarshaler = (*Size)(nil)
	_ encoding.TextMarshaler   = Size(0)
	_ unstable.Unmarshaler     = (*Size)(nil)
	_ encoding.TextUnmarshaler = (*Ratio)(nil)
	_ unstable.Unmarshaler     = (*Ratio)(nil)
)

func TestParseSize(t *testing.T) {
	ok := []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"4096", 4096}, {"128B", 128}, {"512KiB", 512 << 10}, {"4MiB", 4 << 20}, {"1GiB", 1 << 30},
		{"2TiB", 2 << 40}, {"1.5GiB", 1536 << 20}, {"0.5KiB", 512}, {"4MB", 4e6}, {"1KB", 1000}, {"3GB", 3e9},
		{"1TB", 1e12}, {"4 MiB", 4 << 20}, {" 4mib ", 4 << 20}, {"4KIB", 4096}, {"1.000B", 1},
		{"9223372036854775807", math.MaxInt64}, {"8191.99999999999999999999999999TiB", 0},
	}
	for _, tt := range ok {
		got, err := ParseSize(tt.in)
		if tt.in == "8191.99999999999999999999999999TiB" {
			// Exact arithmetic: not a whole number of bytes, so rejected.
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || int64(got) != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", `invalid size "" (want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes)`},
		{"-1", `invalid size "-1": must not be negative`},
		{"1.5B", `invalid size "1.5B": not a whole number of bytes`},
		{"1e3", `invalid size "1e3": unknown unit "e3" (want B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB = powers of 1000)`},
		{"4M", `invalid size "4M": unknown unit "M" (want B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB = powers of 1000)`},
		{"1..5GiB", `invalid size "1..5GiB": malformed number "1..5" (want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes)`},
		{".5GiB", `invalid size ".5GiB": malformed number ".5" (want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes)`},
		{"9223372036854775808", `invalid size "9223372036854775808": too large (at most 9223372036854775807 bytes)`},
		{"8192PiB", `invalid size "8192PiB": unknown unit "PiB" (want B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB = powers of 1000)`},
		{"MiB", `invalid size "MiB" (want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes)`},
	}
	for _, tt := range bad {
		_, err := ParseSize(tt.in)
		if err == nil || err.Error() != tt.msg {
			t.Errorf("ParseSize(%q) error:\n got %v\nwant %s", tt.in, err, tt.msg)
		}
	}
}

func TestSizeString(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0B", 1: "1B", 1000: "1KB", 1001: "1001B", 3e9: "3GB", 1024: "1KiB", 1536 << 20: "1536MiB", 1 << 30: "1GiB", 3 << 40: "3TiB",
		4 << 20: "4MiB", 4e6: "4MB", math.MaxInt64: "9223372036854775807B",
	} {
		if got := Size(n).String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", n, got, want)
		}
	}
	if _, err := Size(-1).MarshalText(); err == nil {
		t.Error("MarshalText of a negative size succeeded")
	}
}

func TestParseDuration(t *testing.T) {
	ok := map[string]time.Duration{
		"0": 0, "0s": 0, "500ms": 500 * time.Millisecond, "2s": 2 * time.Second, "72h": 72 * time.Hour,
		"1m30s": 90 * time.Second, "1.5h": 90 * time.Minute, "10us": 10 * time.Microsecond, "10µs": 10 * time.Microsecond,
	}
	for in, want := range ok {
		got, err := ParseDuration(in)
		if err != nil || got.D() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":          `invalid duration "": empty (want e.g. "500ms", "2s")`,
		"5":         `invalid duration "5": a bare number has no unit (want e.g. "500ms", "2s")`,
		"3d":        `invalid duration "3d": there is no day unit (use hours, e.g. "72h")`,
		"-1s":       `invalid duration "-1s": must not be negative`,
		"5 parsecs": `invalid duration "5 parsecs" (want e.g. "500ms", "2s")`,
		"1y":        `invalid duration "1y" (want e.g. "500ms", "2s")`,
	}
	for in, msg := range bad {
		_, err := ParseDuration(in)
		if err == nil || err.Error() != msg {
			t.Errorf("ParseDuration(%q) error:\n got %v\nwant %s", in, err, msg)
		}
	}
}

func TestDurationString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 72 * time.Hour: "72h", 90 * time.Second: "90s", 90 * time.Minute: "90m", 500 * time.Millisecond: "500ms",
		1500 * time.Microsecond: "1500us", 7: "7ns", time.Hour + time.Millisecond: "3600001ms",
	} {
		if got := Duration(d).String(); got != want {
			t.Errorf("Duration(%v).String() = %q, want %q", d, got, want)
		}
	}
	if _, err := Duration(-1).MarshalText(); err == nil {
		t.Error("MarshalText of a negative duration succeeded")
	}
}

func TestParseRatio(t *testing.T) {
	ok := map[string]float64{"0": 0, "1": 1, "0.75": 0.75, "75%": 0.75, "100%": 1, "0%": 0, " 12.5 % ": 0.125}
	for in, want := range ok {
		got, err := ParseRatio(in)
		if err != nil || float64(got) != want {
			t.Errorf("ParseRatio(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1.01", "101%", "-0.1", "nan", "inf", "1e-1", "x%", "%"} {
		if got, err := ParseRatio(in); err == nil {
			t.Errorf("ParseRatio(%q) = %v, want an error", in, got)
		}
	}
}

// TestUnmarshalTOML feeds raw TOML values, as go-toml hands them over.
func TestUnmarshalTOML(t *testing.T) {
	type tc struct {
		raw  string
		want string // formatted value, or "error: <substring>"
	}
	run := func(name string, u interface {
		unstable.Unmarshaler
		fmt.Stringer
	}, cases []tc) {
		for _, c := range cases {
			err := u.UnmarshalTOML([]byte(c.raw))
			switch {
			case strings.HasPrefix(c.want, "error: "):
				if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(c.want, "error: ")) {
					t.Errorf("%s.UnmarshalTOML(%s) error = %v, want it to contain %q", name, c.raw, err, strings.TrimPrefix(c.want, "error: "))
				}
			case err != nil:
				t.Errorf("%s.UnmarshalTOML(%s) = %v", name, c.raw, err)
			case u.String() != c.want:
				t.Errorf("%s.UnmarshalTOML(%s) = %s, want %s", name, c.raw, u.String(), c.want)
			}
		}
	}
	var d Duration
	run("Duration", &d, []tc{
		{`"5s"`, "5s"}, {`'250ms'`, "250ms"}, {`"""1h"""`, "1h"}, {`"\u0031s"`, "1s"},
		{`5`, "error: a bare number has no unit"}, {`1.5`, "error: a bare number has no unit"},
		{`true`, "error: got a boolean"}, {`[1]`, "error: got an array"}, {`{a = 1}`, "error: got a table"},
		{`a = 1`, "error: got a table"}, {``, "error: got a table"}, {`1979-05-27`, "error: got a date/time"},
	})
	var s Size
	run("Size", &s, []tc{
		{`"4MiB"`, "4MiB"}, {`1_024`, "1KiB"}, {`0x10`, "16B"}, {`0o20`, "16B"}, {`0b10000`, "16B"}, {`+8`, "8B"},
		{`-1`, "error: must not be negative"}, {`9223372036854775807`, "9223372036854775807B"},
		{`1.0`, "error: a byte count is a whole number"}, {`false`, "error: got a boolean"}, {`"x"`, "error: invalid size"},
	})
	var r ratioStringer
	run("Ratio", &r, []tc{
		{`0.75`, "0.75"}, {`1`, "1"}, {`0`, "0"}, {`"75%"`, "0.75"}, {`'0.5'`, "0.5"}, {`1e-1`, "0.1"}, {`5_0e-2`, "0.5"},
		{`inf`, "error: invalid ratio inf"}, {`nan`, "error: invalid ratio nan"}, {`-0.5`, "error: out of range"},
		{`2`, "error: out of range"}, {`[0.5]`, "error: got an array"},
	})
}

// ratioStringer gives Ratio a String method for the table above.
type ratioStringer struct{ Ratio }

func (r *ratioStringer) String() string { return strconv.FormatFloat(float64(r.Ratio), 'g', -1, 64) }

func TestTextUnmarshalers(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("2s")); err != nil || d.D() != 2*time.Second {
		t.Errorf("Duration.UnmarshalText: %v %v", d, err)
	}
	if err := d.UnmarshalText([]byte("nope")); err == nil || d.D() != 2*time.Second {
		t.Errorf("failed UnmarshalText changed the value or succeeded: %v %v", d, err)
	}
	var s Size
	if err := s.UnmarshalText([]byte("1GiB")); err != nil || s.Bytes() != 1<<30 {
		t.Errorf("Size.UnmarshalText: %v %v", s, err)
	}
	var r Ratio
	if err := r.UnmarshalText([]byte("90%")); err != nil || r.F() != 0.9 {
		t.Errorf("Ratio.UnmarshalText: %v %v", r, err)
	}
	if b, err := Size(1 << 20).MarshalText(); err != nil || string(b) != "1MiB" {
		t.Errorf("Size.MarshalText = %s, %v", b, err)
	}
	if b, err := Duration(time.Minute).MarshalText(); err != nil || string(b) != "1m" {
		t.Errorf("Duration.MarshalText = %s, %v", b, err)
	}
}

func TestTypesRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Int64Range(0, math.MaxInt64).Draw(t, "n")
		if got, err := ParseSize(Size(n).String()); err != nil || int64(got) != n {
			t.Fatalf("size %d: %q parsed to %d, %v", n, Size(n).String(), got, err)
		}
		if got, err := ParseDuration(Duration(n).String()); err != nil || int64(got) != n {
			t.Fatalf("duration %d: %q parsed to %d, %v", n, Duration(n).String(), got, err)
		}
		f := rapid.Float64Range(0, 1).Draw(t, "f")
		if got, err := ParseRatio(strconv.FormatFloat(f, 'f', -1, 64)); err != nil || float64(got) != f {
			t.Fatalf("ratio %v parsed to %v, %v", f, got, err)
		}
		// Binary units scale exactly; decimal ones by powers of 1000.
		k := rapid.Int64Range(0, 1<<20).Draw(t, "k")
		unit := rapid.SampledFrom([]string{"B", "KiB", "MiB", "GiB", "KB", "MB", "GB"}).Draw(t, "unit")
		mult := map[string]int64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
		if got, err := ParseSize(strconv.FormatInt(k, 10) + unit); err != nil || int64(got) != k*mult {
			t.Fatalf("%d%s parsed to %d, %v; want %d", k, unit, got, err, k*mult)
		}
	})
}
