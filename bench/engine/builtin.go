package engine

import (
	"context"
	"fmt"
	"log/slog"

	flushstrategies "github.com/keelmq/keel/plugins/flush-strategies"
	indexhash "github.com/keelmq/keel/plugins/index-hash"
	"github.com/keelmq/keel/sdk"
)

// The builtin flush strategies and the hash index, in builtin mode, every
// key at its default: a cell runs the plugins themselves (bench's
// replication.go registers the replication pair, bench's external.go the
// external modes).
func init() {
	for _, name := range flushstrategies.Names() {
		RegisterFlush(name, "builtin", "plugin", func() (Runner, error) {
			p, err := flushstrategies.New(name)
			if err != nil {
				return nil, err
			}
			return PluginRunner(context.Background(), p, sdk.Config{Name: name, Section: string(sdk.KindFlush), Role: "master"})
		})
	}
	RegisterIndex("hash", "builtin", "plugin", func(dir string) (Indexer, error) {
		ix := indexhash.New(indexhash.WithLogger(slog.New(slog.DiscardHandler)))
		cfg := sdk.Config{Name: "hash", Section: string(sdk.KindIndex), Role: "master", DataDir: dir}
		if err := ix.Configure(context.Background(), cfg); err != nil {
			return nil, fmt.Errorf("configure index-hash: %w", err)
		}
		return PluginIndexer(ix), nil
	})
}
