package replication

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
)

func TestDecodeConfig(t *testing.T) {
	doc := `schema = 1
[flush]
plugin = "sync"
[flush.config]
anything = "goes here"

[replication]
plugin = "custom"
[replication.config]
wait_replicas = 2
timeout = "250ms"
max_lag = "1MiB"
batch_size = 4096
`
	var fc FullConfig
	if err := DecodeConfig(sdk.Config{File: "p.toml", Document: []byte(doc), Section: "replication"}, &fc); err != nil {
		t.Fatal(err)
	}
	if fc.WaitReplicas != 2 || fc.Timeout.D() != 250*time.Millisecond || fc.MaxLag != 1<<20 || fc.BatchSize != 4096 {
		t.Fatalf("%+v", fc)
	}
	// No table: defaults kept.
	fc = FullConfig{WaitReplicas: 7}
	if err := DecodeConfig(sdk.Config{Document: []byte("schema = 1\n[replication]\nplugin = \"x\"\n"), Section: "replication"}, &fc); err != nil || fc.WaitReplicas != 7 {
		t.Fatalf("%v %+v", err, fc)
	}
	for _, tc := range []struct{ doc, want string }{
		{"[replication.config]\nwait_replicas = 1\nnope = 2\n", "p.toml:3:1: replication.config.nope"},
		{"[replication.config]\ntimeout = 3\n", "timeout"},
		{"[replication.config]\nack_on = 1\n", "ack_on"},
		{"[replication]\nconfig = 5\n", "want a table"},
		{"[replication.config\n", "p.toml"},
	} {
		var fc FullConfig
		err := DecodeConfig(sdk.Config{File: "p.toml", Document: []byte(tc.doc), Section: "replication"}, &fc)
		if !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (want %q)", tc.doc, err, tc.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{}.WithDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for key, mut := range map[string]func(*Options){
		"batch_size":            func(o *Options) { o.BatchSize = 10 },
		"max_frame_size":        func(o *Options) { o.MaxFrameSize = 1 << 20 },
		"idle_timeout":          func(o *Options) { o.IdleTimeout = o.HeartbeatInterval },
		"ack_on":                func(o *Options) { o.AckOn = "both" },
		"wait_replicas":         func(o *Options) { o.WaitReplicas = -1 },
		"start_fenced":          func(o *Options) { o.StartFenced = "maybe" },
		"reconnect_backoff_max": func(o *Options) { o.ReconnectBackoffMax = time.Millisecond },
		"max_lag":               func(o *Options) { o.MaxLag = -5 },
	} {
		o := ok
		mut(&o)
		if err := o.Validate(); !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", key, err)
		}
	}
}
