package config_test

import (
	"errors"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
)

// TestSDKConfigDecode checks sdk.Config.Decode, the way plugins call
// DecodeSection: same values, same text, and errors.Is ErrInvalidConfig.
func TestSDKConfigDecode(t *testing.T) {
	type cfg struct {
		Interval config.Duration `toml:"interval"`
		Buffer   config.Size     `toml:"buffer"`
	}
	doc := []byte("schema = 1\n[flush]\nplugin = \"x\"\n[flush.config]\ninterval = \"2s\"\n")
	c := sdk.Config{File: "p.toml", Document: config.WithOverrides(doc, []config.Override{{Arg: "flush.config.buffer=1KiB", Doc: []byte("flush.config.buffer = \"1KiB\"\n")}}), Section: "flush"}
	v := cfg{Buffer: 1}
	if err := c.Decode(&v); err != nil || v.Interval.D() != 2*time.Second || v.Buffer != 1024 {
		t.Fatalf("Decode: %v %+v", err, v)
	}

	for _, tt := range []struct{ doc, want string }{
		{"schema = 1\n[flush.config]\ninterval = \"soon\"\n", `p.toml:3:12: flush.config.interval: invalid duration "soon" (want e.g. "500ms", "2s")`},
		{"schema = 1\n[flush.config]\na = 1\nb = 2\n", "p.toml:3:1: flush.config.a: unknown key; allowed in [flush.config]: interval, buffer\np.toml:4:1: flush.config.b: unknown key; allowed in [flush.config]: interval, buffer"},
	} {
		c.Document = []byte(tt.doc)
		err := c.Decode(&v)
		if err == nil || err.Error() != tt.want {
			t.Errorf("text:\n got %v\nwant %s", err, tt.want)
		}
		if !errors.Is(err, sdk.ErrInvalidConfig) {
			t.Errorf("%v does not wrap sdk.ErrInvalidConfig", err)
		}
		var pe *config.Error
		if !errors.As(err, &pe) || pe.Line != 3 {
			t.Errorf("errors.As *config.Error: %#v", pe)
		}
		if direct := config.DecodeSection(c.File, c.Document, c.Section, &v); direct == nil || direct.Error() != err.Error() {
			t.Errorf("DecodeSection says %v, Decode %v", direct, err)
		}
	}

	// Misuse is not a configuration problem.
	if err := c.Decode(v); err == nil || errors.Is(err, sdk.ErrInvalidConfig) {
		t.Errorf("non-pointer: %v", err)
	}
}
