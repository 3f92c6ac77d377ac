package main

import (
	flush "github.com/keelmq/keel/plugins/flush-strategies"
	indexhash "github.com/keelmq/keel/plugins/index-hash"
	replicationasync "github.com/keelmq/keel/plugins/replication-async"
	replicationsync "github.com/keelmq/keel/plugins/replication-sync"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/sdk"
)

// The builtin catalog: every plugin compiled into this binary, by the name
// profiles use.
func init() {
	for _, name := range flush.Names() {
		name := name
		host.RegisterBuiltin(sdk.KindFlush, name, func() sdk.Plugin {
			f, err := flush.New(name)
			if err != nil {
				panic(err) // Names and New disagree: a programming error
			}
			return f
		})
	}
	host.RegisterBuiltin(sdk.KindIndex, "hash", func() sdk.Plugin { return indexhash.New() })
	host.RegisterBuiltin(sdk.KindReplication, "async", func() sdk.Plugin { return replicationasync.New() })
	host.RegisterBuiltin(sdk.KindReplication, "sync", func() sdk.Plugin { return replicationsync.New() })
}
