package echo_test

import (
	"testing"

	"github.com/keelmq/keel/sdk"
	echo "github.com/keelmq/keel/sdk/examples/replication-echo"
	"github.com/keelmq/keel/sdk/plugintest"
)

// The conformance suite with a policy that waits for two slaves: with
// one, every ack is SLAVE_NOT_AVAILABLE at once; with two, both must hold
// every acknowledged byte.
func TestReplicationTwoOfTwo(t *testing.T) {
	plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return echo.New() },
		plugintest.WithConfig(loaded+"\nwait_replicas = 2"), plugintest.WithDivergentTailRepair())
}
