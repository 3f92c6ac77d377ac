package plugintest_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/internal/testplugin"
	"github.com/keelmq/keel/sdk/plugintest"
)

// The suites must fail on broken plugins. Each broken case runs the suite
// in a child test process (this test binary re-run with -test.run) and
// checks that it fails with the expected complaint.

const brokenEnv = "KEEL_PLUGINTEST_BROKEN"

// neverFlush promises synchronous flushes and never flushes.
type neverFlush struct{}

func (neverFlush) Configure(context.Context, sdk.Config) error { return nil }
func (neverFlush) Start(context.Context, sdk.Host) error       { return nil }
func (neverFlush) Stop(context.Context) error                  { return nil }
func (neverFlush) AckPolicy() sdk.FlushPolicy {
	return sdk.FlushPolicy{WaitFlush: true, Timeout: 100 * time.Millisecond}
}

// stopless keeps flushing after Stop.
type stopless struct{ *testplugin.Flush }

func (stopless) Stop(context.Context) error { return nil }

// oldestFirst answers queries in the wrong order.
type oldestFirst struct{ *testplugin.MemIndex }

func (o oldestFirst) Query(ctx context.Context, q sdk.Query) ([]int64, error) {
	offs, err := o.MemIndex.Query(ctx, sdk.Query{Topic: q.Topic, Key: q.Key, Begin: q.Begin, End: q.End, Max: 1 << 30})
	slices.Reverse(offs)
	return offs[:min(len(offs), q.Max)], err
}

func TestBrokenPluginHelper(t *testing.T) {
	switch os.Getenv(brokenEnv) {
	case "":
		t.Skip("run by TestSuitesCatchBrokenPlugins")
	case "never-flush":
		plugintest.RunFlush(t, func(*testing.T) sdk.FlushStrategy { return neverFlush{} }, plugintest.WithLoad(2, 3))
	case "stopless":
		plugintest.RunFlush(t, func(*testing.T) sdk.FlushStrategy { return stopless{testplugin.NewAsyncFlush()} },
			plugintest.WithConfig(`interval = "5ms"`), plugintest.WithLoad(1, 10))
	case "oldest-first":
		plugintest.RunIndex(t, func(*testing.T) sdk.Indexer { return oldestFirst{testplugin.NewMemIndex()} }, plugintest.WithLoad(1, 60))
	}
}

func TestSuitesCatchBrokenPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child test processes")
	}
	for _, tc := range []struct {
		name, run, want string
	}{
		{"never-flush", "TestBrokenPluginHelper/AcksUnderLoad", "not flushed within 100ms"},
		{"stopless", "TestBrokenPluginHelper/StopStopsFlushing", "after Stop returned"},
		{"oldest-first", "TestBrokenPluginHelper/QueryAndIdempotence", "not strictly newest first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^"+strings.ReplaceAll(tc.run, "/", "$/^")+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+tc.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a broken plugin (%s):\n%s", tc.name, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("the suite failed, but without %q:\n%s", tc.want, out)
			}
		})
	}
}
