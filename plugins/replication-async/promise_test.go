package replicationasync

import (
	"testing"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
)

// The conformance suite with replicas acknowledging only what they
// flushed: the acknowledged offset the async replicator reports must then
// survive a replica's power cut.
func TestConformanceAckOnFlush(t *testing.T) {
	plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return New() },
		plugintest.WithConfig(fast+"\nack_on = \"flushed\""), plugintest.WithReplicaAckOnFlush(), plugintest.WithDivergentTailRepair())
}
