package plugintest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	replicationsync "github.com/keelmq/keel/plugins/replication-sync"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/replication"
)

// fencer is the builtin sync replicator changed to do what the guide's
// mirror does after a takeover: instead of repairing, every master but the
// first one reports itself fenced (so its host takes no writes) and
// acknowledges nothing new, which is safe.
type fencer struct {
	*replicationsync.Plugin
	masters *atomic.Int32 // master-role instances configured so far
	fence   bool
}

func (f *fencer) Configure(ctx context.Context, cfg sdk.Config) error {
	if cfg.Role == "master" {
		f.fence = f.masters.Add(1) > 1
	}
	return f.Plugin.Configure(ctx, cfg)
}

func (f *fencer) Start(ctx context.Context, h sdk.Host) error {
	if f.fence {
		h = &fencedHost{Host: h}
	}
	return f.Plugin.Start(ctx, h)
}

type fencedHost struct {
	sdk.Host
	acked atomic.Int64 // the AckedOffset of the first report: never more
	seen  atomic.Bool
}

func (h *fencedHost) ReportReplication(ctx context.Context, st sdk.ReplicationState) error {
	if h.seen.CompareAndSwap(false, true) {
		h.acked.Store(st.AckedOffset)
	}
	st.AckedOffset = min(st.AckedOffset, h.acked.Load())
	st.Fenced, st.Reason = true, "fences instead of repairing a divergent tail"
	return h.Host.ReportReplication(ctx, st)
}

// runDivergentTail runs the DivergentTail fault on the fencer, recording
// its failures; fenced is the fault's verdict.
func runDivergentTail(t *testing.T, opts ...Option) (r *recorder, fenced bool) {
	o := buildOptions(append([]Option{WithConfig(fastSync + "\nwait_replicas = 1")}, opts...))
	var masters atomic.Int32
	newPlugin := func(*testing.T) sdk.Replicator {
		return &fencer{Plugin: replicationsync.New(), masters: &masters}
	}
	r = newRecorder(t, "fencer")
	r.run("DivergentTail", func(t suiteT) {
		fenced = faultDivergentTail(newScenario(t, newPlugin, o, 2, false))
	})
	return r, fenced
}

// A plugin that fences after the takeover instead of repairing is safe:
// the suite reports it as such and passes it, unless repair is required.
func TestDivergentTailFencedIsSafeNotRepaired(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the DivergentTail fault")
	}
	r, fenced := runDivergentTail(t)
	if r.Failed() {
		t.Fatalf("DivergentTail failed a plugin that fences safely instead of repairing:\n%s", r.messages())
	}
	if !fenced {
		t.Error("DivergentTail passed the fencer as repaired")
	}
}

// With WithDivergentTailRepair, the same plugin fails.
func TestDivergentTailRepairRequired(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the DivergentTail fault")
	}
	r, fenced := runDivergentTail(t, WithDivergentTailRepair())
	if !r.Failed() || fenced {
		t.Fatalf("DivergentTail passed a plugin that never repairs (fenced verdict %v), though repair was required", fenced)
	}
	if msgs := r.messages(); !strings.Contains(msgs, "refused appends") {
		t.Errorf("with repair required, DivergentTail failed the fencer without saying its master refused appends:\n%s", msgs)
	}
}

// noCatchUp is the builtin sync replicator made to behave as the guide's
// mirror does after a takeover: its masters after the first forget that
// they took over (their replication state is deleted, so the old master's
// longer tail is not recognised as superseded) and cannot catch up from a
// replica (the host refuses the pulled bytes). Such a new master takes
// writes until the old master's handshake reaches it, and is fenced from
// then on.
type noCatchUp struct {
	*replicationsync.Plugin
	masters *atomic.Int32
	refuse  bool
}

func (n *noCatchUp) Configure(ctx context.Context, cfg sdk.Config) error {
	if cfg.Role == "master" {
		n.refuse = n.masters.Add(1) > 1
	}
	if n.refuse {
		if err := os.Remove(filepath.Join(cfg.DataDir, replication.StateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return n.Plugin.Configure(ctx, cfg)
}

func (n *noCatchUp) Start(ctx context.Context, h sdk.Host) error {
	if n.refuse {
		h = refusingHost{h}
	}
	return n.Plugin.Start(ctx, h)
}

type refusingHost struct{ sdk.Host }

func (refusingHost) AppendLog(context.Context, int64, []byte) error {
	return errors.New("this master does not catch up from replicas")
}

// DivergentTail's verdict waits for the new master's answer to the old
// master. Here the old master's link is slow, so the other slave is in
// sync with an unfenced new master first; the fence comes only with the
// old master's handshake, and the fault must report it as fenced, not
// fail the plugin for refusing writes it had seemed to take.
func TestDivergentTailVerdictAwaitsOldMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the DivergentTail fault")
	}
	o := buildOptions([]Option{WithConfig(fastSync + "\nwait_replicas = 1"),
		func(o *options) { o.oldMasterDelay = 100 * time.Millisecond }})
	var masters atomic.Int32
	newPlugin := func(*testing.T) sdk.Replicator {
		return &noCatchUp{Plugin: replicationsync.New(), masters: &masters}
	}
	r := newRecorder(t, "no catch-up")
	var fenced bool
	r.run("DivergentTail", func(t suiteT) {
		fenced = faultDivergentTail(newScenario(t, newPlugin, o, 2, false))
	})
	if r.Failed() {
		t.Fatalf("DivergentTail failed a master that fences once the old master's tail reaches it:\n%s", r.messages())
	}
	if !fenced {
		t.Error("DivergentTail passed a master that never catches up as repaired")
	}
}
