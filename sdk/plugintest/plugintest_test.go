package plugintest_test

import (
	"os"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/internal/testplugin"
	"github.com/keelmq/keel/sdk/plugintest"
)

const testPluginPkg = "github.com/keelmq/keel/sdk/internal/testplugin/cmd/testplugin"

func TestMain(m *testing.M) { os.Exit(plugintest.Main(m)) }

func TestFlushSyncInProcess(t *testing.T) {
	plugintest.RunFlush(t, func(*testing.T) sdk.FlushStrategy { return testplugin.NewSyncFlush() })
}

func TestFlushAsyncInProcess(t *testing.T) {
	plugintest.RunFlush(t, func(*testing.T) sdk.FlushStrategy { return testplugin.NewAsyncFlush() },
		plugintest.WithConfig(`interval = "10ms"`), plugintest.WithAsyncFlushWithin(time.Second))
}

func TestIndexInProcess(t *testing.T) {
	plugintest.RunIndex(t, func(*testing.T) sdk.Indexer { return testplugin.NewMemIndex() })
}

func TestFlushSyncExternal(t *testing.T) {
	plugintest.RunFlush(t, plugintest.ExternalFlush(plugintest.Build(t, testPluginPkg), "sync-flush"))
}

func TestFlushAsyncExternal(t *testing.T) {
	plugintest.RunFlush(t, plugintest.ExternalFlush(plugintest.Build(t, testPluginPkg), "async-flush"),
		plugintest.WithConfig(`interval = "10ms"`), plugintest.WithAsyncFlushWithin(time.Second))
}

func TestIndexExternal(t *testing.T) {
	plugintest.RunIndex(t, plugintest.ExternalIndexer(plugintest.Build(t, testPluginPkg), "mem-index"))
}
