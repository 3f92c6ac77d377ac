package indexhash

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
)

const profileHead = `schema = 1
[store]
segment_size = "64MiB"

[flush]
plugin = "async"

[index]
plugin = "hash"
`

func sdkConfig(doc string) sdk.Config {
	return sdk.Config{Name: "hash", File: "p.toml", Document: []byte(doc), Section: "index", DataDir: "/idx"}
}

func TestDecodeConfig(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want func(*Config)
		err  string // substring of the error; "" = success
	}{
		{name: "empty document", doc: "", want: func(*Config) {}},
		{name: "no config table", doc: profileHead, want: func(*Config) {}},
		{name: "all keys", doc: profileHead + `
[index.config]
hash_slots = 7
entries_per_file = 11
max_query = 3
clean_interval = "250ms"
`, want: func(c *Config) {
			c.HashSlots, c.EntriesPerFile, c.MaxQuery = 7, 11, 3
			c.CleanInterval = config.Duration(250 * time.Millisecond)
		}},
		{name: "dotted keys", doc: profileHead + "config.hash_slots = 9\n", want: func(c *Config) { c.HashSlots = 9 }},
		{name: "unknown key", doc: profileHead + "[index.config]\nhash_slot = 7\n", err: "p.toml:11:1: index.config.hash_slot: unknown key"},
		{name: "wrong type", doc: profileHead + "[index.config]\nhash_slots = \"many\"\n", err: "p.toml:11:14: index.config.hash_slots"},
		{name: "duration without unit", doc: profileHead + "[index.config]\nclean_interval = 5\n", err: "a bare number has no unit"},
		{name: "slots out of range", doc: profileHead + "[index.config]\nhash_slots = 0\n", err: "p.toml:11:14: index.config.hash_slots: 0 is out of range"},
		{name: "slots out of range from --set", doc: string(config.WithOverrides([]byte(profileHead), []config.Override{{Arg: "index.config.hash_slots=0", Doc: []byte("index.config.hash_slots = 0\n")}})),
			err: "p.toml: --set index.config.hash_slots=0: index.config.hash_slots: 0 is out of range"},
		{name: "entries out of range", doc: profileHead + "[index.config]\nentries_per_file = 1\n", err: "entries_per_file: 1 is out of range"},
		{name: "file too large", doc: profileHead + "[index.config]\nhash_slots = 500000000\nentries_per_file = 1000000000\n", err: "exceeds"},
		{name: "max_query out of range", doc: profileHead + "[index.config]\nmax_query = 0\n", err: "max_query"},
		{name: "syntax error", doc: profileHead + "[index.config\n", err: "p.toml:"},
		{name: "other sections' unknown keys are not ours", doc: profileHead + "bogus = 1\n[flush.config]\nwhatever = 2\n[index.config]\nmax_query = 5\n",
			want: func(c *Config) { c.MaxQuery = 5 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeConfig(sdkConfig(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if !errors.Is(err, sdk.ErrInvalidConfig) {
					t.Fatalf("error %v does not wrap sdk.ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultConfig()
			tc.want(&want)
			if c != want {
				t.Fatalf("config %+v, want %+v", c, want)
			}
		})
	}
}

func TestDecodeConfigOtherSection(t *testing.T) {
	cfg := sdkConfig("[idx2.config]\nhash_slots = 3\n[index.config]\nhash_slots = 4\n")
	cfg.Section = "idx2"
	c, err := DecodeConfig(cfg)
	if err != nil || c.HashSlots != 3 {
		t.Fatalf("got %+v, %v", c, err)
	}
}
