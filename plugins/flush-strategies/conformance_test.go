package flushstrategies

import (
	"os"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
)

func TestMain(m *testing.M) { os.Exit(plugintest.Main(m)) }

// conformanceConfigs are the [flush.config] snippets the conformance suite
// runs each strategy with: short intervals so the async checks finish
// quickly.
var conformanceConfigs = map[string]string{
	NameSync:     ``,
	NameAsync:    "interval = \"10ms\"\nleast_pages = 1\nthorough_interval = \"50ms\"",
	NameBuffered: "commit_interval = \"5ms\"\ninterval = \"10ms\"\nleast_pages = 1\nthorough_interval = \"50ms\"",
}

// TestConformanceBuiltin runs sdk/plugintest's flush suite against every
// strategy in-process.
func TestConformanceBuiltin(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			plugintest.RunFlush(t, func(*testing.T) sdk.FlushStrategy {
				s, err := New(name)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, plugintest.WithConfig(conformanceConfigs[name]), plugintest.WithAsyncFlushWithin(2*time.Second))
		})
	}
}

// TestConformanceExternal runs the same suite against cmd/keel-flush
// serving each strategy as a separate process over go-plugin.
func TestConformanceExternal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts plugin processes")
	}
	bin := plugintest.Build(t, "./cmd/keel-flush")
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			plugintest.RunFlush(t, plugintest.ExternalFlush(bin, "-strategy", name),
				plugintest.WithConfig(conformanceConfigs[name]), plugintest.WithAsyncFlushWithin(2*time.Second))
		})
	}
}
