package profile

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// flushConfig is a plugin's config struct, as a flush strategy would write it.
type flushConfig struct {
	Interval   Duration `toml:"interval"`
	LeastPages int      `toml:"least_pages"`
	Buffer     Size     `toml:"buffer"`
	Threshold  Ratio    `toml:"threshold"`
	Mode       string   `toml:"mode"`
	Retry      struct {
		Max     int      `toml:"max"`
		Backoff Duration `toml:"backoff"`
	} `toml:"retry"`
}

func defaultFlushConfig() flushConfig {
	c := flushConfig{Interval: Duration(500 * time.Millisecond), LeastPages: 4, Buffer: 1 << 20, Threshold: 0.5, Mode: "timed"}
	c.Retry.Max = 3
	return c
}

const pluginDoc = `schema = 1
[store]
segment_size = "64MiB"

[flush]
plugin = "async"

[flush.config]
interval = "200ms"
buffer = "4MiB"
threshold = "25%"

[flush.config.retry]
backoff = "1s"

[index]
plugin = "hash"
`

func TestDecodePluginConfig(t *testing.T) {
	p := mustLoad(t, pluginDoc)
	c := defaultFlushConfig()
	if err := p.DecodePluginConfig(SectionFlush, &c); err != nil {
		t.Fatal(err)
	}
	want := defaultFlushConfig()
	want.Interval = Duration(200 * time.Millisecond)
	want.Buffer = 4 << 20
	want.Threshold = 0.25
	want.Retry.Backoff = Duration(time.Second)
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config:\n got %+v\nwant %+v", c, want)
	}

	// A section without config leaves v untouched, defaults and all.
	c2 := defaultFlushConfig()
	if err := p.DecodePluginConfig(SectionIndex, &c2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c2, defaultFlushConfig()) {
		t.Errorf("index config changed: %+v", c2)
	}
	c3 := defaultFlushConfig()
	if err := p.DecodePluginConfig(SectionReplication, &c3); err != nil || !reflect.DeepEqual(c3, defaultFlushConfig()) {
		t.Errorf("replication: err %v, config %+v", err, c3)
	}
}

func TestDecodePluginConfigOverrides(t *testing.T) {
	p := mustLoad(t, pluginDoc, "flush.config.interval=1s", "flush.config.retry.max=9", "store.segment_size=128MiB")
	c := defaultFlushConfig()
	if err := p.DecodePluginConfig(SectionFlush, &c); err != nil {
		t.Fatal(err)
	}
	if c.Interval.D() != time.Second || c.Retry.Max != 9 || c.Buffer != 4<<20 {
		t.Errorf("config = %+v", c)
	}
	// An override of the whole table replaces it, for the plugin as for the host.
	p = mustLoad(t, pluginDoc, "flush.config.mode=a", `flush.config={least_pages = 1}`, "flush.config.mode=b")
	c = defaultFlushConfig()
	if err := p.DecodePluginConfig(SectionFlush, &c); err != nil {
		t.Fatal(err)
	}
	want := defaultFlushConfig()
	want.LeastPages, want.Mode = 1, "b"
	if !reflect.DeepEqual(c, want) || !reflect.DeepEqual(p.Flush.Config, map[string]any{"least_pages": int64(1), "mode": "b"}) {
		t.Errorf("config = %+v, host copy %v", c, p.Flush.Config)
	}
	// An override alone creates the config table.
	p = mustLoad(t, "schema = 1\n", "index.config.mode=fast")
	if err := p.DecodePluginConfig(SectionIndex, &c); err != nil || c.Mode != "fast" {
		t.Errorf("err %v, mode %q", err, c.Mode)
	}
	// An invalid override value is reported against the override.
	p = mustLoad(t, pluginDoc, "flush.config.interval=soon")
	err := p.DecodePluginConfig(SectionFlush, &c)
	wantErr := `profiles/x.toml: --set flush.config.interval=soon: flush.config.interval: invalid duration "soon" (want e.g. "500ms", "2s")`
	if err == nil || err.Error() != wantErr {
		t.Errorf("err:\n got %v\nwant %s", err, wantErr)
	}
}

func TestDecodePluginConfigErrors(t *testing.T) {
	head := "schema = 1\n[flush]\nplugin = \"async\"\n[flush.config]\n" // the config starts on line 5
	allowed := "allowed in [flush.config]: interval, least_pages, buffer, threshold, mode, retry"
	tests := []struct {
		name, body, want string
	}{
		{"unknown key", "intervall = \"1s\"\n",
			`profiles/x.toml:5:1: flush.config.intervall: unknown key (did you mean "interval"?); ` + allowed},
		{"unknown nested key", "retry.tries = 3\n",
			`profiles/x.toml:5:7: flush.config.retry.tries: unknown key; allowed in [flush.config.retry]: max, backoff`},
		{"wrong type", "least_pages = \"four\"\n",
			`profiles/x.toml:5:15: flush.config.least_pages: want an integer, got a string`},
		{"invalid duration", "interval = \"5 parsecs\"\n",
			`profiles/x.toml:5:12: flush.config.interval: invalid duration "5 parsecs" (want e.g. "500ms", "2s")`},
		{"bare number duration", "mode = \"x\"\ninterval = 5\n",
			`profiles/x.toml:6:12: flush.config.interval: invalid duration 5: a bare number has no unit (want e.g. "500ms", "2s"; quote it)`},
		{"invalid size", "buffer = \"lots\"\n",
			`profiles/x.toml:5:10: flush.config.buffer: invalid size "lots" (want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes)`},
		{"invalid ratio", "threshold = 2\n",
			`profiles/x.toml:5:13: flush.config.threshold: invalid ratio 2: out of range (want a number between 0 and 1 such as 0.75, or a percentage such as "75%")`},
		{"nested invalid duration", "[flush.config.retry]\nbackoff = \"later\"\n",
			`profiles/x.toml:6:11: flush.config.retry.backoff: invalid duration "later" (want e.g. "500ms", "2s")`},
		{"key below a duration", "interval.ms = \"5ms\"\n",
			`profiles/x.toml:5:10: flush.config.interval.ms: unknown key: flush.config.interval is a duration string (e.g. "500ms", "2s"), not a table`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoad(t, head+tt.body) // the host accepts any plugin table
			c := defaultFlushConfig()
			err := p.DecodePluginConfig(SectionFlush, &c)
			if err == nil || err.Error() != tt.want {
				t.Errorf("err:\n got %v\nwant %s", err, tt.want)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("%T is not an *Error", err)
			}
		})
	}
}

func TestDecodePluginConfigMisuse(t *testing.T) {
	p := mustLoad(t, pluginDoc)
	var c flushConfig
	if err := p.DecodePluginConfig("store", &c); err == nil || !strings.Contains(err.Error(), "unknown plugin section") {
		t.Errorf("store section: %v", err)
	}
	if err := p.DecodePluginConfig(SectionFlush, c); err == nil || !strings.Contains(err.Error(), "non-nil pointer") {
		t.Errorf("non-pointer: %v", err)
	}
	if err := p.DecodePluginConfig(SectionFlush, (*flushConfig)(nil)); err == nil {
		t.Error("nil pointer accepted")
	}
	// A generic map works as a target too.
	m := map[string]any{}
	if err := p.DecodePluginConfig(SectionFlush, &m); err != nil || m["interval"] != "200ms" {
		t.Errorf("map target: err %v, %v", err, m)
	}
}

func TestErrorf(t *testing.T) {
	p := mustLoad(t, pluginDoc, "flush.config.buffer=8MiB")
	tests := []struct{ key, want string }{
		{"flush.config.interval", `profiles/x.toml:9:12: flush.config.interval: must be at least 1s`},
		{"flush.config.buffer", `profiles/x.toml: --set flush.config.buffer=8MiB: flush.config.buffer: must be at least 1s`},
		{"flush.config.least_pages", `profiles/x.toml: flush.config.least_pages: must be at least 1s`},
		{"store.segment_size", `profiles/x.toml:3:16: store.segment_size: must be at least 1s`},
	}
	for _, tt := range tests {
		if got := p.Errorf(tt.key, "must be at least %s", "1s").Error(); got != tt.want {
			t.Errorf("Errorf(%q):\n got %s\nwant %s", tt.key, got, tt.want)
		}
	}
}

func TestEffectiveRoundTrip(t *testing.T) {
	profiles := map[string]string{
		"default": "schema = 1\n",
		"plugin":  pluginDoc,
		"slave": `schema = 1
[replication]
plugin = "sync"
role = "slave"
master_addr = "127.0.0.1:10912"
secret = "s3cret \"quoted\""
[replication.config]
acks = 1
timeout = "3s"
peers = ["a", "b"]
[replication.config.nested]
x = 1.5
[server]
broker_addr = "127.0.0.1:0"
ha_addr = ":0"
namesrv_addr = "127.0.0.1:9877"
[admin]
addr = "127.0.0.1:0"
`,
		"external": `schema = 1
[store]
dir = "/tmp/keel data"
segment_size = 65537
max_message_size = "1KiB"
read_cache = "1000KB"
disk_max_used_ratio = 0.1
disk_clean_forcibly_ratio = 0.1
disk_warning_ratio = 0.1
delete_when = "1;02;23"
[flush]
path = "../bin/flush plugin"
sha256 = "` + strings.Repeat("aB", 32) + `"
[index]
plugin = "none"
[server]
idle_timeout = "1h1m1s1ms"
max_frame_size = "1.5GiB"
`,
	}
	for name, doc := range profiles {
		t.Run(name, func(t *testing.T) {
			p := mustLoad(t, doc, "server.max_connections=7")
			out, err := p.Effective()
			if err != nil {
				t.Fatal(err)
			}
			q, err := LoadBytes("profiles/x.toml", out, nil)
			if err != nil {
				t.Fatalf("reloading the effective profile: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(docOf(p), docOf(q)) {
				t.Errorf("round trip differs:\n got %+v\nwant %+v\n%s", docOf(q), docOf(p), out)
			}
			out2, err := q.Effective()
			if err != nil || string(out2) != string(out) {
				t.Errorf("Effective is not a fixpoint (err %v):\n%s\n---\n%s", err, out, out2)
			}
		})
	}
}

func TestEffectiveContent(t *testing.T) {
	p := mustLoad(t, pluginDoc, "replication.secret=hunter2")
	out, err := p.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"schema = 1", "segment_size = '64MiB'", "file_reserved_time = '72h'", "idle_timeout = '2m'",
		"disk_max_used_ratio = 0.75", "plugin = 'async'", "[flush.config]", "interval = '200ms'", "secret = 'hunter2'"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("effective profile lacks %q:\n%s", want, out)
		}
	}
	red, err := p.EffectiveRedacted()
	if err != nil || strings.Contains(string(red), "hunter2") || !strings.Contains(string(red), "secret = '(redacted)'") {
		t.Errorf("redacted (err %v):\n%s", err, red)
	}
	// After DecodePluginConfig, the plugin's defaults appear too.
	c := defaultFlushConfig()
	if err := p.DecodePluginConfig(SectionFlush, &c); err != nil {
		t.Fatal(err)
	}
	out, err = p.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"least_pages = 4", "mode = 'timed'", "interval = '200ms'", "buffer = '4MiB'", "[flush.config.retry]", "max = 3", "backoff = '1s'"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("effective profile lacks %q:\n%s", want, out)
		}
	}
	q, err := LoadBytes("profiles/x.toml", out, nil)
	if err != nil {
		t.Fatal(err)
	}
	var c2 flushConfig
	if err := q.DecodePluginConfig(SectionFlush, &c2); err != nil || !reflect.DeepEqual(c, c2) {
		t.Errorf("plugin config round trip: err %v\n got %+v\nwant %+v", err, c2, c)
	}
}

func TestKeyPosition(t *testing.T) {
	doc := []byte(`schema = 1
[store]
segment_size = "1GiB"   # comment
  dir = "d"
[flush.config]
interval = "1s"
[server]
"quoted.key" = 1
inline = { a = 1, b = { c = 2 } }
a.b.c = 3
[[arr]]
x = 1
`)
	tests := []struct {
		key       string
		line, col int
		ok        bool
	}{
		{"schema", 1, 1, true},
		{"store", 2, 2, true},
		{"store.segment_size", 3, 1, true},
		{"store.dir", 4, 3, true},
		{"flush", 5, 2, true},
		{"flush.config", 5, 8, true},
		{"flush.config.interval", 6, 1, true},
		{`server."quoted.key"`, 8, 1, true},
		{"server.inline.a", 9, 12, true},
		{"server.inline.b.c", 9, 25, true},
		{"server.a.b", 10, 3, true},
		{"server.a.b.c", 10, 5, true},
		{"arr.x", 12, 1, true},
		{"store.nothing", 0, 0, false},
		{"store..bad", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		line, col, ok := KeyPosition(doc, tt.key)
		if line != tt.line || col != tt.col || ok != tt.ok {
			t.Errorf("KeyPosition(%q) = %d:%d %v, want %d:%d %v", tt.key, line, col, ok, tt.line, tt.col, tt.ok)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	p := mustLoad(t, pluginDoc)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				c := defaultFlushConfig()
				if err := p.DecodePluginConfig(SectionFlush, &c); err != nil || c.Interval.D() != 200*time.Millisecond {
					t.Errorf("decode: %v %+v", err, c)
					return
				}
				if _, err := p.Effective(); err != nil {
					t.Errorf("Effective: %v", err)
					return
				}
				_ = p.Errorf("flush.config.interval", "x").Error()
			}
		}()
	}
	wg.Wait()
}

func TestPluginConfigInline(t *testing.T) {
	p := mustLoad(t, "schema = 1\nflush = { plugin = \"sync\", config = { interval = \"3s\", retry = { max = 1, backoff = \"oops\" } } }\n")
	c := defaultFlushConfig()
	err := p.DecodePluginConfig(SectionFlush, &c)
	want := `profiles/x.toml:2:85: flush.config.retry.backoff: invalid duration "oops" (want e.g. "500ms", "2s")`
	if err == nil || err.Error() != want {
		t.Errorf("err:\n got %v\nwant %s", err, want)
	}
}

// TestConfigOfNoPluginRefused: a config table under a section whose plugin
// is "none" is an error (no plugin would read it), in the file and by
// --set.
func TestConfigOfNoPluginRefused(t *testing.T) {
	for _, c := range []struct {
		doc  string
		sets []string
		want string
	}{
		{"schema = 1\n[replication.config]\nwait_replicas = 2\n", nil, `profiles/x.toml:2:2: replication.config: is set, but replication.plugin is "none", so no plugin reads it`},
		{"schema = 1\n", []string{"replication.config.bogus=5"}, `profiles/x.toml: replication.config: is set, but replication.plugin is "none"`},
		{"schema = 1\n", []string{"index.plugin=none", "index.config.hash_slotz=5"}, `index.config: is set, but index.plugin is "none"`},
	} {
		_, err := LoadBytes("profiles/x.toml", []byte(c.doc), c.sets)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %v: got %v, want %s", c.doc, c.sets, err, c.want)
		}
	}
	mustLoad(t, "schema = 1\n[replication]\nplugin = \"none\"\n")
}
