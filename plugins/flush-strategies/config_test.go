package flushstrategies

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
)

const fullProfile = `schema = 1

[store]
dir = "data"
segment_size = "1GiB"

[flush]
plugin = "async"
sha256 = ""

[flush.config]
interval = "250ms"
least_pages = 8
thorough_interval = "20s"

[replication]
plugin = "none"
role = "master"

[index]
plugin = "hash"
[index.config]
slots = 5000000

[server]
broker_addr = "127.0.0.1:10911"
`

func TestDecodeValid(t *testing.T) {
	ms := func(n int) config.Duration { return config.Duration(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name    string
		doc     string
		section string
		out     any
		want    any
	}{
		{"empty document keeps defaults", "", "", &AsyncConfig{}, &AsyncConfig{}},
		{"no flush section", "schema = 1\n[store]\ndir = \"x\"\n", "", ptr(defaultAsyncConfig()), ptr(defaultAsyncConfig())},
		{"section without config", "[flush]\nplugin = \"async\"\n", "", ptr(defaultAsyncConfig()), ptr(defaultAsyncConfig())},
		{"full profile: other sections and their unknown keys are not ours", fullProfile, "flush", ptr(defaultAsyncConfig()),
			&AsyncConfig{Interval: ms(250), LeastPages: 8, ThoroughInterval: ms(20000)}},
		{"partial config keeps other defaults", "[flush.config]\nleast_pages = 0\n", "flush", ptr(defaultAsyncConfig()),
			&AsyncConfig{Interval: ms(500), LeastPages: 0, ThoroughInterval: ms(10000)}},
		{"inline table", "flush = { plugin = \"sync\", config = { timeout = \"2s\" } }\n", "flush", ptr(defaultSyncConfig()),
			&SyncConfig{Timeout: ms(2000)}},
		{"dotted keys", "flush.config.timeout = \"1m\"\n", "", ptr(defaultSyncConfig()), &SyncConfig{Timeout: config.Duration(time.Minute)}},
		{"another section name", "[custom.config]\ntimeout = \"3s\"\n[flush.config]\ntimeout = \"9s\"\n", "custom", ptr(defaultSyncConfig()),
			&SyncConfig{Timeout: ms(3000)}},
		{"buffered keys", "[flush.config]\ncommit_interval = \"50ms\"\ninterval = \"1s\"\n", "flush", ptr(defaultBufferedConfig()),
			&BufferedConfig{CommitInterval: ms(50), Interval: ms(1000), LeastPages: 4, ThoroughInterval: ms(10000)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeConfig(sdk.Config{File: "p.toml", Document: []byte(tc.doc), Section: tc.section}, tc.out)
			if err != nil {
				t.Fatal(err)
			}
			if !equalConfig(tc.out, tc.want) {
				t.Fatalf("got %+v, want %+v", tc.out, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func equalConfig(a, b any) bool {
	switch x := a.(type) {
	case *AsyncConfig:
		return *x == *b.(*AsyncConfig)
	case *SyncConfig:
		return *x == *b.(*SyncConfig)
	case *BufferedConfig:
		return *x == *b.(*BufferedConfig)
	}
	return false
}

// TestConfigureInvalid: every invalid value is rejected with an error
// wrapping sdk.ErrInvalidConfig that names the file, position, key and
// what is allowed.
func TestConfigureInvalid(t *testing.T) {
	tests := []struct {
		strategy string
		doc      string
		want     []string
	}{
		{NameAsync, "[flush.config]\ninterval = \"1s\"\nbogus = 3\n", []string{"p.toml:3:1", "flush.config.bogus", "unknown key", "interval", "least_pages", "thorough_interval"}},
		{NameAsync, "[flush.config]\ntimeout = \"1s\"\n", []string{"p.toml:2:1", "flush.config.timeout", "unknown key"}},
		{NameSync, "[flush.config]\ninterval = \"1s\"\n", []string{"p.toml:2:1", "flush.config.interval", "unknown key", "allowed in [flush.config]: timeout"}},
		{NameAsync, "[flush.config]\ninterval = 500\n", []string{"p.toml:2:12", "flush.config.interval", "500", "no unit"}},
		{NameAsync, "[flush.config]\ninterval = true\n", []string{"p.toml:2:12", "flush.config.interval", "boolean"}},
		{NameAsync, "[flush.config]\ninterval = \"5d\"\n", []string{"p.toml:2:12", "flush.config.interval", `invalid duration "5d"`}},
		{NameAsync, "[flush.config]\ninterval = \"-1s\"\n", []string{"flush.config.interval", "negative"}},
		{NameAsync, "[flush.config]\ninterval = \"0s\"\n", []string{"p.toml:2:12", "flush.config.interval", "must be > 0"}},
		{NameAsync, "[flush.config]\nleast_pages = \"4\"\n", []string{"p.toml:2:15", "flush.config.least_pages", "want an integer"}},
		{NameAsync, "[flush.config]\nleast_pages = 4.5\n", []string{"flush.config.least_pages", "float", "want an integer"}},
		{NameAsync, "[flush.config]\nleast_pages = -1\n", []string{"p.toml:2:15", "flush.config.least_pages", "[0, 1048576]"}},
		{NameAsync, "[flush.config]\ninterval = \"2s\"\nthorough_interval = \"1s\"\n", []string{"p.toml:3:21", "flush.config.thorough_interval", ">= interval"}},
		{NameBuffered, "[flush.config]\ncommit_interval = \"0s\"\n", []string{"flush.config.commit_interval", "must be > 0"}},
		{NameSync, "[flush.config]\ntimeout = \"0s\"\n", []string{"p.toml:2:11", "flush.config.timeout", "must be > 0"}},
		{NameAsync, "[flush]\nconfig = 3\n", []string{"p.toml:2:10", "flush.config", "want a table"}},
		{NameAsync, "[flush.config\n", []string{"p.toml:1:"}},
		{NameAsync, "[flush.config]\n[flush.config]\n", []string{"p.toml:2:"}},
		{NameAsync, "[flush.config]\ninterval = { a = 1 }\n", []string{"flush.config.interval", "a table"}},
		{NameAsync, "[flush.config.deeper]\nx = 1\n", []string{"flush.config.deeper", "unknown key"}},
	}
	for _, tc := range tests {
		t.Run(tc.strategy+"/"+strings.ReplaceAll(tc.doc, "\n", "|"), func(t *testing.T) {
			s, _ := New(tc.strategy)
			err := s.Configure(bg, sdk.Config{File: "p.toml", Document: []byte(tc.doc), Section: "flush"})
			if !errors.Is(err, sdk.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestConfigureInvalidOverride: a value a --set override set and the
// strategy rejects is reported against the override, not against the
// file's line of the key it replaced.
func TestConfigureInvalidOverride(t *testing.T) {
	doc := config.WithOverrides([]byte("[flush.config]\ninterval = \"1s\"\n"),
		[]config.Override{{Arg: "flush.config.interval=0s", Doc: []byte("flush.config.interval = \"0s\"\n")}})
	s, _ := New(NameAsync)
	err := s.Configure(bg, sdk.Config{File: "p.toml", Document: doc, Section: "flush"})
	want := "p.toml: --set flush.config.interval=0s: flush.config.interval: 0s is not allowed: must be > 0"
	if !errors.Is(err, sdk.ErrInvalidConfig) || err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want one wrapping ErrInvalidConfig that begins %q", err, want)
	}
}

// TestConfigureKeepsOldOnError: a rejected Configure leaves the previous
// configuration in force.
func TestConfigureKeepsOldOnError(t *testing.T) {
	s := configured(t, NameSync, `timeout = "2s"`)
	if err := s.Configure(bg, sdk.Config{Document: []byte("[flush.config]\ntimeout = \"0s\"\n"), Section: "flush"}); err == nil {
		t.Fatal("accepted timeout 0s")
	}
	if got := s.AckPolicy().Timeout; got != 2*time.Second {
		t.Fatalf("timeout %s after a rejected Configure", got)
	}
}

// FuzzConfigure feeds arbitrary profiles to every strategy's Configure: it
// must never panic, must either accept or return an error wrapping
// sdk.ErrInvalidConfig, and an accepted configuration must be valid.
func FuzzConfigure(f *testing.F) {
	f.Add(fullProfile)
	f.Add("[flush.config]\ninterval = \"1s\"\nleast_pages = 2\n")
	f.Add("[flush.config]\ntimeout = \"5s\"\n")
	f.Add("flush = { config = { commit_interval = \"1ms\" } }\n")
	f.Add("[flush]\nconfig = 3\n")
	f.Add("[flush.config]\ninterval = 500\n")
	f.Add("[[flush]]\n")
	f.Fuzz(func(t *testing.T, doc string) {
		for _, name := range Names() {
			s, _ := New(name)
			err := s.Configure(bg, sdk.Config{File: "f.toml", Document: []byte(doc), Section: "flush"})
			if err != nil {
				if !errors.Is(err, sdk.ErrInvalidConfig) {
					t.Fatalf("%s: error %v does not wrap ErrInvalidConfig", name, err)
				}
				continue
			}
			p := s.AckPolicy()
			if p.WaitFlush && p.Timeout <= 0 {
				t.Fatalf("%s accepted a non-positive timeout", name)
			}
			var verr error
			switch x := s.(type) {
			case *asyncStrategy:
				verr = x.cfg.validate(sdk.Config{})
			case *bufferedStrategy:
				verr = x.cfg.validate(sdk.Config{})
			case *syncStrategy:
				verr = x.cfg.validate(sdk.Config{})
			}
			if verr != nil {
				t.Fatalf("%s accepted an invalid configuration: %v", name, verr)
			}
		}
	})
}

func TestKeysAreCaseSensitive(t *testing.T) {
	s, _ := New(NameAsync)
	err := s.Configure(bg, sdk.Config{File: "p.toml", Document: []byte("[flush.config]\nleAst_pAges = 0\nInterval = \"1s\"\n"), Section: "flush"})
	if !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), "flush.config.leAst_pAges: unknown key") ||
		!strings.Contains(err.Error(), "p.toml:3:1: flush.config.Interval: unknown key") {
		t.Fatalf("mixed-case keys: %v", err)
	}
}
