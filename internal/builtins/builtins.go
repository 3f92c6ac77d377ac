// Package builtins is keel's builtin plugin catalog: every plugin compiled
// into a keel binary, under the names profiles use (`plugin = "<name>"`).
// The mains (cmd/keel, bench/cmd/keelbench) and bench/wire build it with
// Catalog and hand it to the host.
//
// It sits at the level of the mains: it imports host and the plugins, which
// may not import each other (docs/architecture.md, import direction).
package builtins

import (
	"fmt"

	"github.com/keelmq/keel/host"
	flush "github.com/keelmq/keel/plugins/flush-strategies"
	indexhash "github.com/keelmq/keel/plugins/index-hash"
	replicationasync "github.com/keelmq/keel/plugins/replication-async"
	replicationsync "github.com/keelmq/keel/plugins/replication-sync"
	"github.com/keelmq/keel/sdk"
)

// Catalog returns a new catalog of every builtin plugin: the flush
// strategies by their names (flush.Names), the hash indexer as "hash",
// the replicators as "async" and "sync".
func Catalog() *host.Catalog {
	c := &host.Catalog{}
	add := func(kind sdk.Kind, name string, f host.Factory) {
		if err := c.Add(kind, name, f); err != nil {
			panic(err) // two builtins under one name: a programming error
		}
	}
	for _, name := range flush.Names() {
		add(sdk.KindFlush, name, func() sdk.Plugin {
			f, err := flush.New(name)
			if err != nil {
				panic(fmt.Errorf("builtin flush strategy %q: %w", name, err)) // Names and New disagree
			}
			return f
		})
	}
	add(sdk.KindIndex, "hash", func() sdk.Plugin { return indexhash.New() })
	add(sdk.KindReplication, "async", func() sdk.Plugin { return replicationasync.New() })
	add(sdk.KindReplication, "sync", func() sdk.Plugin { return replicationsync.New() })
	return c
}
