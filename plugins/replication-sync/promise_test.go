package replicationsync

import (
	"testing"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
)

// The conformance suite with the other policies in one run, to keep its
// time down: acks waiting for two replicas (with one slave every ack is
// SLAVE_NOT_AVAILABLE at once; with two, both must hold each acknowledged
// byte) that acknowledge only what they flushed (a replica's power cut
// must lose no acknowledged byte).
func TestConformanceTwoOfTwoAckOnFlush(t *testing.T) {
	plugintest.RunReplication(t, func(*testing.T) sdk.Replicator { return New() },
		plugintest.WithConfig(fast+"\nwait_replicas = 2\nack_on = \"flushed\""), plugintest.WithReplicaAckOnFlush(), plugintest.WithDivergentTailRepair())
}
