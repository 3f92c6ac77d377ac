package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/host/profile"
	replicationsync "github.com/keelmq/keel/plugins/replication-sync"
	"github.com/keelmq/keel/sdk"
	echo "github.com/keelmq/keel/sdk/examples/replication-echo"
	"github.com/keelmq/keel/sdk/replication"
)

// tableFor configures r with the [replication.config] table doc and
// returns what it declares and the durability table of a master using it.
func tableFor(t *testing.T, r sdk.Replicator, doc string) (Replication, []DurabilityRow) {
	t.Helper()
	ctx := context.Background()
	cfg := sdk.Config{Name: "r", File: "p.toml", Document: []byte("[replication.config]\n" + doc), Section: "replication",
		Role: sdk.RoleMaster, DataDir: t.TempDir(), Addr: "127.0.0.1:0"}
	if err := r.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	d := declaredReplication(ctx, r, r.AckPolicy())
	return d, Durability(profile.RoleMaster, sdk.FlushPolicy{}, d, "async", true)
}

func wantRow(t *testing.T, rows []DurabilityRow, question string, parts ...string) {
	t.Helper()
	got := answer(rows, question)
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("%s = %q, want it to say %q", question, got, p)
		}
	}
}

// TestDurabilityBuiltinDeclares: the builtin sync replicator's table
// follows its configuration: replicas acknowledging after fsync, how many,
// visibility, and promotion (it implements sdk.Promoter).
func TestDurabilityBuiltinDeclares(t *testing.T) {
	d, rows := tableFor(t, replicationsync.New(), "wait_replicas = 2\nack_on = \"flushed\"\nvisible_after_replicated = true\n")
	if !d.Promotes || d.ReplicaAck != replication.AckFlushed || d.Policy.WaitReplicas != 2 {
		t.Fatalf("declared %+v", d)
	}
	wantRow(t, rows, "producer ack sent", "after 2 replica(s) acknowledged it", "a replica acknowledges after fsyncing the bytes")
	wantRow(t, rows, "power loss", "also fsynced on 2 replica(s)")
	wantRow(t, rows, "loss of the master", "promote an in-sync slave (keel admin promote)")
	wantRow(t, rows, "consumer visibility", "only replicated messages")

	_, rows = tableFor(t, replicationsync.New(), "")
	wantRow(t, rows, "producer ack sent", "after 1 replica(s)", "a replica acknowledges on receipt, before any fsync")
	wantRow(t, rows, "power loss", "unless they lose power at the same time")
	wantRow(t, rows, "consumer visibility", "every written message, replicated or not")
}

// TestDurabilityExampleDeclares: the guide's example implements no
// sdk.Promoter and does not say what its replicas' acks mean, so the table
// promises no promotion and says the plugin does not say.
func TestDurabilityExampleDeclares(t *testing.T) {
	d, rows := tableFor(t, echo.New(), "")
	if d.Promotes || d.ReplicaAck != "" {
		t.Fatalf("declared %+v", d)
	}
	wantRow(t, rows, "producer ack sent", "after 1 replica(s)", "on receipt or after fsync, the plugin does not say")
	wantRow(t, rows, "power loss", "the plugin does not say")
	wantRow(t, rows, "loss of the master", "the replicator cannot promote a slave", "sdk.Promoter")
	if got := answer(rows, "loss of the master"); strings.Contains(got, "promote an in-sync slave") {
		t.Errorf("loss of the master promises promotion: %q", got)
	}
	slave := Durability(profile.RoleSlave, sdk.FlushPolicy{}, Replication{Promotes: d.Promotes}, "async", true)
	wantRow(t, slave, "loss of the master", "this node is a slave", "cannot promote")
}

// oddReplicator declares unusual values: three replicas, visibility after
// replication, an "ack_on" the table does not know, and Promote.
type oddReplicator struct{}

func (oddReplicator) Configure(context.Context, sdk.Config) error { return nil }
func (oddReplicator) Start(context.Context, sdk.Host) error       { return nil }
func (oddReplicator) Stop(context.Context) error                  { return nil }
func (oddReplicator) AckPolicy() sdk.ReplicationPolicy {
	return sdk.ReplicationPolicy{WaitReplicas: 3, Timeout: 1500 * time.Millisecond, VisibleAfterReplicated: true}
}
func (oddReplicator) Promote(context.Context) (int32, error) { return 0, sdk.ErrNotSupported }
func (oddReplicator) Status(context.Context) ([]byte, error) {
	return []byte(`{"ack_on":"when-it-feels-like-it"}`), nil
}

// TestDurabilityTestPluginDeclares: the table reads the plugin, not its
// name: three replicas, 1.5s, an unknown ack meaning reported as not said.
func TestDurabilityTestPluginDeclares(t *testing.T) {
	d, rows := tableFor(t, oddReplicator{}, "")
	if !d.Promotes || d.ReplicaAck != "" || d.Policy.WaitReplicas != 3 {
		t.Fatalf("declared %+v", d)
	}
	wantRow(t, rows, "producer ack sent", "after 3 replica(s) acknowledged it", "FLUSH_SLAVE_TIMEOUT after 1.5s", "the plugin does not say")
	wantRow(t, rows, "power loss", "also on 3 replica(s)", "the plugin does not say")
	wantRow(t, rows, "loss of the master", "promote an in-sync slave")
	wantRow(t, rows, "consumer visibility", "only replicated messages")
}
