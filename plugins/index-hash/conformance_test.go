package indexhash

import (
	"os"
	"testing"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/plugintest"
)

// benchCleanup removes what the benchmarks left (bench_test.go sets it).
var benchCleanup = func() {}

func TestMain(m *testing.M) {
	code := plugintest.Main(m)
	benchCleanup()
	os.Exit(code)
}

// conformanceConfig uses small files so the suite's records fill several.
const conformanceConfig = "hash_slots = 101\nentries_per_file = 97\nclean_interval = \"50ms\"\n"

func TestConformance(t *testing.T) {
	plugintest.RunIndex(t, func(*testing.T) sdk.Indexer { return New() }, plugintest.WithConfig(conformanceConfig))
}

func TestConformanceExternal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the plugin binary")
	}
	bin := plugintest.Build(t, "./cmd/keel-index-hash")
	plugintest.RunIndex(t, plugintest.ExternalIndexer(bin), plugintest.WithConfig(conformanceConfig))
}
