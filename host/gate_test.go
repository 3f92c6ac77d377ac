package host

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// TestWriteGate: the gate closes and reopens as each of its sources
// changes — the role, the replication fence, a plugin's state — and a send
// meets exactly the gate's reason, while /status's text follows it too.
func TestWriteGate(t *testing.T) {
	s, err := core.Open(core.Options{Dir: t.TempDir(), SegmentSize: 1 << 20, MaxMessageSize: 64 << 10, CQEntriesPerFile: 1024})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	n := &Node{log: slog.Default(), store: s, host: storehost.New(s, nil)}
	n.metrics = newMetrics(n)
	n.host.OnFenceChange(func() { n.gate.update(n) })
	lp := &loadedPlugin{kind: sdk.KindReplication, name: "test", state: stateRunning}
	lp.onState = func() { n.gate.update(n) }
	n.plugins = []*loadedPlugin{lp}
	n.gate.update(n)

	send := func() error {
		_, err := backend{n}.Append(context.Background(), []*record.Message{{Topic: "T", Body: []byte("x")}})
		return err
	}
	want := func(step, sub string) {
		t.Helper()
		err := send()
		if sub == "" {
			if err != nil {
				t.Fatalf("%s: send refused: %v", step, err)
			}
			if got := n.WriteRefusal(); got != "yes" {
				t.Fatalf("%s: status writable %q, want yes", step, got)
			}
			return
		}
		if !errors.Is(err, remoting.ErrServiceUnavailable) || !strings.Contains(err.Error(), sub) {
			t.Fatalf("%s: send got %v, want SERVICE_NOT_AVAILABLE naming %q", step, err, sub)
		}
		if got := n.WriteRefusal(); !strings.Contains(got, sub) || strings.HasPrefix(got, remoting.ErrServiceUnavailable.Error()) {
			t.Fatalf("%s: status writable %q, want the reason %q alone", step, got, sub)
		}
	}

	want("open", "")
	n.setSlave(true)
	want("slave", "this broker is a slave")
	n.setSlave(false)
	want("promoted", "")

	ctx := context.Background()
	if err := n.host.ReportReplication(ctx, sdk.ReplicationState{Fenced: true, Reason: "behind replica r1"}); err != nil {
		t.Fatal(err)
	}
	want("fenced", "writes fenced by replication: behind replica r1")
	if err := n.host.ReportReplication(ctx, sdk.ReplicationState{Fenced: true, Reason: "catching up"}); err != nil {
		t.Fatal(err)
	}
	want("fence reason changed", "writes fenced by replication: catching up")
	if err := n.host.ReportReplication(ctx, sdk.ReplicationState{}); err != nil {
		t.Fatal(err)
	}
	want("fence lifted", "")

	errsBefore := n.metrics.appendErrors.Get()
	lp.setState(stateDegraded, "process exited; restarting")
	want("plugin down", "replication plugin test is down: process exited; restarting")
	if got := n.metrics.appendErrors.Get() - errsBefore; got != 1 {
		t.Fatalf("append errors counted for a send refused while a plugin was down: %d, want 1", got)
	}
	lp.setState(stateRunning, "")
	want("plugin back", "")

	// The slave reason wins over the others, as a slave's plugin states
	// do not matter to its senders.
	n.setSlave(true)
	lp.setState(stateDegraded, "gone")
	want("slave and plugin down", "this broker is a slave")

	// The store's own reasons come after the gate's.
	n.setSlave(false)
	lp.setState(stateRunning, "")
	s.Close()
	if got := n.WriteRefusal(); !strings.Contains(got, "closed") {
		t.Fatalf("closed store: status writable %q, want the store's reason", got)
	}
}
