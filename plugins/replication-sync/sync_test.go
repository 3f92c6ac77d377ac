package replicationsync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
	"github.com/keelmq/keel/sdk/replication"
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
	bin := plugintest.Build(t, "./cmd/replication-sync")
	plugintest.RunReplication(t, plugintest.ExternalReplicator(bin), plugintest.WithConfig(fast), plugintest.WithDivergentTailRepair())
}

func profile(t *testing.T, table string) sdk.Config {
	doc := "schema = 1\n[flush]\nplugin = \"sync\"\n[flush.config]\ninterval = \"1s\"\n\n[replication]\nplugin = \"sync\"\nrole = \"master\"\n[replication.config]\n" + table + "\n"
	file := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return sdk.Config{Name: "sync", File: file, Document: []byte(doc), Section: "replication", Role: "master"}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		table string
		err   string // "" = accepted
		check func(*testing.T, *Plugin)
	}{
		{table: "", check: func(t *testing.T, p *Plugin) {
			if pol := p.AckPolicy(); pol.WaitReplicas != 1 || pol.Timeout != 3*time.Second || pol.VisibleAfterReplicated {
				t.Fatalf("defaults %+v", pol)
			}
			if o := p.Options(); o.MaxLag != 256<<20 || o.AckOn != "received" || o.BatchSize != replication.DefaultBatchSize {
				t.Fatalf("options %+v", o)
			}
		}},
		{table: "wait_replicas = 2\ntimeout = \"500ms\"\nack_on = \"flushed\"\nvisible_after_replicated = true\nmax_lag = \"1MiB\"\nbatch_size = 65536",
			check: func(t *testing.T, p *Plugin) {
				pol := p.AckPolicy()
				if pol.WaitReplicas != 2 || pol.Timeout != 500*time.Millisecond || !pol.VisibleAfterReplicated {
					t.Fatalf("policy %+v", pol)
				}
				if o := p.Options(); o.MaxLag != 1<<20 || o.AckOn != "flushed" || o.BatchSize != 65536 {
					t.Fatalf("options %+v", o)
				}
			}},
		{table: "min_in_sync_replicas = 0", check: func(t *testing.T, p *Plugin) {
			if pol := p.AckPolicy(); !pol.AllowFewer || pol.MinReplicas != 0 || pol.WaitReplicas != 1 {
				t.Fatalf("min_in_sync_replicas = 0: policy %+v, want AllowFewer with MinReplicas 0", pol)
			}
		}},
		{table: "min_in_sync_replicas = 1", check: func(t *testing.T, p *Plugin) {
			if pol := p.AckPolicy(); pol.AllowFewer {
				t.Fatalf("min_in_sync_replicas = wait_replicas allows nothing fewer: policy %+v", pol)
			}
		}},
		{table: "min_in_sync_replicas = 2", err: "min_in_sync_replicas = 2 is not allowed: want 0 to wait_replicas (1)"},
		{table: "min_in_sync_replicas = -1", err: "min_in_sync_replicas"},
		{table: "wait_replica = 1", err: "wait_replica"},
		{table: "wait_replicas = 0", err: "wait_replicas"},
		{table: "wait_replicas = \"one\"", err: "wait_replicas"},
		{table: "timeout = 3", err: "timeout"},
		{table: "timeout = \"3 seconds\"", err: "timeout"},
		{table: "ack_on = \"disk\"", err: "ack_on"},
		{table: "max_lag = \"lots\"", err: "max_lag"},
		{table: "heartbeat_interval = \"10s\"\nidle_timeout = \"15s\"", err: "idle_timeout"},
		{table: "start_fenced = \"sometimes\"", err: "start_fenced"},
	}
	for _, tc := range tests {
		t.Run(tc.table, func(t *testing.T) {
			p := New()
			err := p.Configure(context.Background(), profile(t, tc.table))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, p)
				return
			}
			if !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v: want ErrInvalidConfig naming %q", err, tc.err)
			}
		})
	}
}

func TestSlaveNeedsMasterAddr(t *testing.T) {
	cfg := profile(t, "")
	cfg.Role = "slave"
	if err := New().Configure(context.Background(), cfg); !errors.Is(err, sdk.ErrInvalidConfig) {
		t.Fatalf("slave without master address: %v", err)
	}
}
