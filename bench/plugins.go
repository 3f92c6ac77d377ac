package bench

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/keelmq/keel/bench/engine"
	flushstrategies "github.com/keelmq/keel/plugins/flush-strategies"
	indexhash "github.com/keelmq/keel/plugins/index-hash"
	"github.com/keelmq/keel/sdk"
)

// The real plugins that exist take over from bench/engine's emulations
// (builtin mode, every key at its default); cells report impl=plugin for
// them.
func init() {
	for _, name := range flushstrategies.Names() {
		engine.RegisterFlush(name, "builtin", "plugin", func() (engine.Runner, error) {
			p, err := flushstrategies.New(name)
			if err != nil {
				return nil, err
			}
			return engine.PluginRunner(context.Background(), p, sdk.Config{Name: name, Section: string(sdk.KindFlush), Role: "master"})
		})
	}
	engine.RegisterIndex("hash", "builtin", "plugin", func(dir string) (engine.Indexer, error) {
		ix := indexhash.New(indexhash.WithLogger(slog.New(slog.DiscardHandler)))
		cfg := sdk.Config{Name: "hash", Section: string(sdk.KindIndex), Role: "master", DataDir: dir}
		if err := ix.Configure(context.Background(), cfg); err != nil {
			return nil, fmt.Errorf("configure index-hash: %w", err)
		}
		return engine.PluginIndexer(ix), nil
	})
}
