// Package clibench links keel's benchmark suite into a CLI built with
// package cli, so that `bench` runs in the same process as the rest of
// the command line instead of executing the keelbench binary:
//
//	func main() {
//		cli.Main(clibench.InProcess(),
//			cli.WithPlugin(sdk.KindReplication, "echo", func() sdk.Plugin { return echo.New() }))
//	}
//
// It is its own package so that a main without it (cmd/keel) does not
// link the suite and the peers it measures against (nats-server, the
// Redis client).
package clibench

import (
	"errors"
	"flag"

	"github.com/keelmq/keel/bench"
	"github.com/keelmq/keel/cli"
	"github.com/keelmq/keel/host"
)

// InProcess returns the option that makes `bench` call bench.Main in this
// process with the arguments after "bench" and the CLI's catalog
// (bench.WithCatalog): the builtins and every cli.WithPlugin, which the
// matrix's axes may name as they name a builtin. --help prints the
// suite's usage and succeeds, as keelbench does. The recovery workload's
// kill9 child re-executes this executable with the same arguments, which
// reach bench.Main again, where the child is recognised first.
func InProcess() cli.Option {
	return cli.WithBench(func(args []string, catalog *host.Catalog) error {
		if err := bench.Main(args, bench.WithCatalog(catalog)); err != nil && !errors.Is(err, flag.ErrHelp) {
			return err
		}
		return nil
	})
}
