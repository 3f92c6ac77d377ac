package config

import (
	"errors"
	"strings"
	"testing"
)

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4MiB", "1.5GiB", "4 MB", "-1", "1e3", "9223372036854775808", "0.0000000001TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err == nil {
			if v < 0 {
				t.Fatalf("ParseSize(%q) = %d < 0", s, v)
			}
			if w, err := ParseSize(v.String()); err != nil || w != v {
				t.Fatalf("ParseSize(%q) = %d, but %q parses to %d, %v", s, v, v.String(), w, err)
			}
		}
		var u Size
		_ = u.UnmarshalTOML([]byte(s))
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "500ms", "72h", "5", "3d", "-1s", "1h1m1.5s", "9223372036854775807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseDuration(s)
		if err == nil {
			if v < 0 {
				t.Fatalf("ParseDuration(%q) = %d < 0", s, v)
			}
			if w, err := ParseDuration(v.String()); err != nil || w != v {
				t.Fatalf("ParseDuration(%q) = %d, but %q parses to %d, %v", s, v, v.String(), w, err)
			}
		}
		var u Duration
		_ = u.UnmarshalTOML([]byte(s))
	})
}

func FuzzParseRatio(f *testing.F) {
	for _, s := range []string{"0", "0.75", "75%", "100%", "1.5", "nan", "1e-1", "99.999999999999999999%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRatio(s)
		if err == nil && !(v >= 0 && v <= 1) {
			t.Fatalf("ParseRatio(%q) = %v, out of [0, 1]", s, v)
		}
		var u Ratio
		if err := u.UnmarshalTOML([]byte(s)); err == nil && !(u >= 0 && u <= 1) {
			t.Fatalf("UnmarshalTOML(%q) = %v, out of [0, 1]", s, u)
		}
	})
}

// FuzzDecodeSection decodes arbitrary documents, with an override when the
// second input is a key=value, into a typed struct and a map: it must not
// panic, and every failure must be a complete *Error.
func FuzzDecodeSection(f *testing.F) {
	f.Add([]byte(profileDoc), "")
	f.Add([]byte(profileDoc), `flush.config.interval="1s"`)
	f.Add([]byte(profileDoc), `flush.config={mode="x"}`)
	f.Add([]byte("flush = { config = { retry = { backoff = \"x\" } } }\n"), "")
	f.Add([]byte("[flush.config]\ninterval.ms = 1\nInterval = 2\n[[flush.config.retry]]\n"), "flush=1")
	f.Add([]byte("[[--set]]\narg = \"a=1\"\ndoc = \"flush.config.mode = 1\"\n"), "")
	f.Add([]byte("[flush.config]\nbuffer = 1e3\nthreshold = nan\n"), "flush.config.buffer=-1")
	f.Fuzz(func(t *testing.T, doc []byte, arg string) {
		var ovs []Override
		if k, v, ok := strings.Cut(arg, "="); ok {
			ovs = append(ovs, Override{Arg: arg, Doc: []byte(k + " = " + v + "\n")})
		}
		full := WithOverrides(doc, ovs)
		check := func(err error) {
			if err == nil {
				return
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.File != "f.toml" || pe.Msg == "" {
				t.Fatalf("%T %q is not a complete *Error", err, err)
			}
		}
		c := defaults()
		check(DecodeSection("f.toml", full, "flush", &c))
		m := map[string]any{}
		check(DecodeSection("f.toml", full, "flush", &m))
	})
}
