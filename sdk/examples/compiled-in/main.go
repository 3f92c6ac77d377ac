// Command compiled-in is keel with a plugin of your own compiled in: the
// whole keel command line (package cli) with the example echo replicator
// (sdk/examples/replication-echo) beside the builtins, selected by a
// profile with `plugin = "echo"` in [replication], and the benchmark
// suite linked in so that `bench` runs in this process. Copy it, import
// your plugins instead, and build it:
//
//	go build -o bin/keel-echo ./sdk/examples/compiled-in
//	bin/keel-echo profile check my.toml
//	bin/keel-echo serve --profile my.toml
//
// docs/plugins.md ("Compiled-in builds") says what each subcommand sees.
package main

import (
	"github.com/keelmq/keel/cli"
	"github.com/keelmq/keel/cli/clibench"
	"github.com/keelmq/keel/sdk"
	echo "github.com/keelmq/keel/sdk/examples/replication-echo"
)

func main() {
	cli.Main(
		cli.WithPlugin(sdk.KindReplication, "echo", func() sdk.Plugin { return echo.New() }),
		clibench.InProcess(),
	)
}
