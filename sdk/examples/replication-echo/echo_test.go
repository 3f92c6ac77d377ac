package echo_test

import (
	"os"
	"testing"

	"github.com/keelmq/keel/sdk"
	echo "github.com/keelmq/keel/sdk/examples/replication-echo"
	"github.com/keelmq/keel/sdk/plugintest"
)

func TestMain(m *testing.M) { os.Exit(plugintest.Main(m)) }

// loaded is the configuration of the tests that wait for the slave: the
// default policy (acks wait for one slave) with a timeout that leaves room
// for a loaded test machine (parallel packages under -race), where a
// slave's disk can stall for seconds.
const loaded = `timeout = "10s"`

// The conformance suite against the plugin in-process, with acks waiting
// for the slave (the default) and without.
func TestReplicationInProcess(t *testing.T) {
	plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return echo.New() }, plugintest.WithConfig(loaded), plugintest.WithDivergentTailRepair())
}

func TestReplicationInProcessAsync(t *testing.T) {
	plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return echo.New() },
		plugintest.WithConfig("wait_replicas = 0\nbatch_bytes = 8192"), plugintest.WithDivergentTailRepair())
}

// The same suite against the plugin binary, one process per instance.
func TestReplicationExternal(t *testing.T) {
	bin := plugintest.Build(t, "./cmd/replication-echo")
	plugintest.RunReplication(t, plugintest.ExternalReplicator(bin), plugintest.WithConfig(loaded), plugintest.WithDivergentTailRepair())
}
