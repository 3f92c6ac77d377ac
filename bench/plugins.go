package bench

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/keelmq/keel/bench/engine"
	indexhash "github.com/keelmq/keel/plugins/index-hash"
	"github.com/keelmq/keel/sdk"
)

// The real plugins that exist take over from bench/engine's emulations;
// cells report impl=plugin for them.
func init() {
	engine.RegisterIndex("hash", "builtin", "plugin", func(dir string) (engine.Indexer, error) {
		ix := indexhash.New(indexhash.WithLogger(slog.New(slog.DiscardHandler)))
		cfg := sdk.Config{Name: "hash", Section: string(sdk.KindIndex), Role: "master", DataDir: dir}
		if err := ix.Configure(context.Background(), cfg); err != nil {
			return nil, fmt.Errorf("configure index-hash: %w", err)
		}
		return engine.PluginIndexer(ix), nil
	})
}
