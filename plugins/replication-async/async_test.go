package replicationasync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
)

func TestMain(m *testing.M) { os.Exit(plugintest.Main(m)) }

const fast = `heartbeat_interval = "50ms"
idle_timeout = "2s"
reconnect_backoff = "10ms"
reconnect_backoff_max = "100ms"
sync_meta_interval = "100ms"`

func TestConformance(t *testing.T) {
	plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return New() }, plugintest.WithConfig(fast), plugintest.WithDivergentTailRepair())
}

func TestConformanceExternal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin := plugintest.Build(t, "./cmd/replication-async")
	plugintest.RunReplication(t, plugintest.ExternalReplicator(bin), plugintest.WithConfig(fast), plugintest.WithDivergentTailRepair())
}

func profile(t *testing.T, table string) sdk.Config {
	doc := "schema = 1\n[replication]\nplugin = \"async\"\nrole = \"master\"\nsecret = \"x\"\n[replication.config]\n" + table + "\n[index]\nplugin = \"hash\"\n"
	file := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return sdk.Config{Name: "async", File: file, Document: []byte(doc), Section: "replication", Role: "master"}
}

func TestConfigure(t *testing.T) {
	for _, tc := range []struct{ table, err string }{
		{"", ""},
		{"batch_size = \"1MiB\"\nmax_lag = 1048576\nack_on = \"flushed\"\nvisible_after_replicated = true\nnode_id = \"a\"", ""},
		{"wait_replicas = 1", "wait_replicas"}, // a sync key
		{"timeout = \"3s\"", "timeout"},
		{"batch_size = \"12 apples\"", "batch_size"},
		{"batch_size = 10", "batch_size"},
		{"reconnect_backoff = \"1s\"\nreconnect_backoff_max = \"10ms\"", "reconnect_backoff_max"},
	} {
		t.Run(tc.table, func(t *testing.T) {
			p := New()
			err := p.Configure(context.Background(), profile(t, tc.table))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if pol := p.AckPolicy(); pol.WaitReplicas != 0 {
					t.Fatalf("async policy waits: %+v", pol)
				}
				return
			}
			if !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v: want ErrInvalidConfig naming %q", err, tc.err)
			}
		})
	}
	// The position of an unknown key is reported against the profile.
	err := New().Configure(context.Background(), profile(t, "\nbogus = 1"))
	if err == nil || !strings.Contains(err.Error(), "p.toml:8:") {
		t.Fatalf("unknown key error %v lacks file:line", err)
	}
}
