package host

import (
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/sdk"
)

// TestDurabilityLossOfMaster: the loss-of-the-master row follows the role
// and whether the profile selects a replication plugin (profile.Chosen).
func TestDurabilityLossOfMaster(t *testing.T) {
	syncRepl := sdk.ReplicationPolicy{WaitReplicas: 1, Timeout: 3 * time.Second}
	for _, tc := range []struct {
		name       string
		role       string
		rp         sdk.ReplicationPolicy
		replicated bool
		want       string
	}{
		{"no replica", profile.RoleMaster, sdk.ReplicationPolicy{}, false, "there is no replica"},
		{"async replica", profile.RoleMaster, sdk.ReplicationPolicy{}, true, "not yet replicated"},
		{"sync replica", profile.RoleMaster, syncRepl, true, "no acknowledged message"},
		{"slave", profile.RoleSlave, sdk.ReplicationPolicy{}, true, "this node is a slave"},
	} {
		rows := Durability(tc.role, sdk.FlushPolicy{}, Replication{Policy: tc.rp, Promotes: true}, "async", tc.replicated)
		got := answer(rows, "loss of the master")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: loss of the master = %q, want it to say %q", tc.name, got, tc.want)
		}
	}
}

// TestDurabilityFlushName: the power-loss row names the flush plugin it is
// given, an external binary's path included.
func TestDurabilityFlushName(t *testing.T) {
	rows := Durability(profile.RoleMaster, sdk.FlushPolicy{}, Replication{}, profile.PluginName("", "bin/my-flush"), false)
	if got := answer(rows, "power loss"); !strings.Contains(got, "the bin/my-flush flush strategy") {
		t.Errorf("power loss = %q", got)
	}
	rows = Durability(profile.RoleMaster, sdk.FlushPolicy{WaitFlush: true, Timeout: 5 * time.Second}, Replication{}, "sync", false)
	if got := answer(rows, "producer ack sent"); !strings.Contains(got, "after fdatasync") {
		t.Errorf("producer ack sent = %q", got)
	}
}

func answer(rows []DurabilityRow, question string) string {
	for _, r := range rows {
		if r.Question == question {
			return r.Answer
		}
	}
	return ""
}
