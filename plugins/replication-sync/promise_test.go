package replicationsync

import (
	"testing"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
)

// The conformance suite with the policies beside the default one: acks
// waiting for two replicas (with one slave every ack is
// SLAVE_NOT_AVAILABLE at once; with two, both must hold each acknowledged
// byte), and acks waiting for the replica's flush (a replica's power cut
// must lose no acknowledged byte).

func TestConformanceTwoOfTwo(t *testing.T) {
	plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return New() },
		plugintest.WithConfig(fast+"\nwait_replicas = 2"))
}

func TestConformanceAckOnFlush(t *testing.T) {
	plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return New() },
		plugintest.WithConfig(fast+"\nack_on = \"flushed\""), plugintest.WithReplicaAckOnFlush())
}

func TestConformanceTwoOfTwoExternal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin := plugintest.Build(t, "./cmd/replication-sync")
	plugintest.RunReplication(t, plugintest.ExternalReplicator(bin), plugintest.WithConfig(fast+"\nwait_replicas = 2"))
}
