package plugintest

import (
	"context"
	"strings"
	"testing"

	replicationsync "github.com/keelmq/keel/plugins/replication-sync"
	"github.com/keelmq/keel/sdk"
)

// ackOnConnect is the liar of issue #19: the builtin sync replicator
// changed to report AckedOffset = the master's committed offset whenever
// any slave is connected, so producers are acknowledged before any
// replica holds their records.
type ackOnConnect struct{ *replicationsync.Plugin }

func (l ackOnConnect) Start(ctx context.Context, h sdk.Host) error {
	return l.Plugin.Start(ctx, &lyingHost{Host: h})
}

type lyingHost struct{ sdk.Host }

func (h *lyingHost) ReportReplication(ctx context.Context, st sdk.ReplicationState) error {
	if len(st.Replicas) > 0 {
		if pos, err := h.Host.Positions(ctx); err == nil {
			st.AckedOffset = pos.Committed
		}
	}
	return h.Host.ReportReplication(ctx, st)
}

const fastSync = `heartbeat_interval = "50ms"
idle_timeout = "2s"
reconnect_backoff = "10ms"
reconnect_backoff_max = "100ms"`

// TestPromiseCatchesAckOnConnect runs the replication suite's promise
// checks on the liar, recording instead of reporting their failures, and
// requires them to fail, naming acknowledged-but-not-held records.
func TestPromiseCatchesAckOnConnect(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the replication promise checks")
	}
	o := buildOptions([]Option{WithConfig(fastSync)})
	r := newRecorder(t, "liar")
	r.run("Promise", func(t suiteT) {
		replPromise(t, func(*testing.T) sdk.Replicator { return ackOnConnect{replicationsync.New()} }, o)
	})
	if !r.Failed() {
		t.Fatal("the promise checks passed a replicator that acknowledges whatever is committed once a slave is connected")
	}
	msgs := r.messages()
	for _, want := range []string{"acknowledged but not held", "delay: ", "but only 0 replica store(s) hold"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("the promise checks failed on the liar, but without %q:\n%s", want, msgs)
		}
	}
}
