// Package builtins is keel's builtin plugin catalog: every plugin compiled
// into a keel binary, under the names profiles use (`plugin = "<name>"`).
// The mains (cmd/keel, bench/cmd/keelbench) call Register before anything
// loads a profile.
//
// It sits at the level of the mains: it imports host and the plugins, which
// may not import each other (docs/architecture.md, import direction).
package builtins

import (
	"slices"
	"sync"

	"github.com/keelmq/keel/host"
	flush "github.com/keelmq/keel/plugins/flush-strategies"
	indexhash "github.com/keelmq/keel/plugins/index-hash"
	replicationasync "github.com/keelmq/keel/plugins/replication-async"
	replicationsync "github.com/keelmq/keel/plugins/replication-sync"
	"github.com/keelmq/keel/sdk"
)

var once sync.Once

// Register adds every builtin plugin to host's catalog. It may be called
// more than once and skips names already registered, so it is safe beside
// code that registers some of them itself.
func Register() {
	once.Do(func() {
		reg := func(kind sdk.Kind, name string, f host.Factory) {
			if !slices.Contains(host.Builtins(kind), name) {
				host.RegisterBuiltin(kind, name, f)
			}
		}
		for _, name := range flush.Names() {
			reg(sdk.KindFlush, name, func() sdk.Plugin {
				f, err := flush.New(name)
				if err != nil {
					panic(err) // Names and New disagree: a programming error
				}
				return f
			})
		}
		reg(sdk.KindIndex, "hash", func() sdk.Plugin { return indexhash.New() })
		reg(sdk.KindReplication, "async", func() sdk.Plugin { return replicationasync.New() })
		reg(sdk.KindReplication, "sync", func() sdk.Plugin { return replicationsync.New() })
	})
}
