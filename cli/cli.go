// Package cli is the whole keel command line as a library, so that a main
// of a few lines builds a keel binary with third-party plugins compiled in
// beside the builtins, with every subcommand (the model is Caddy's xcaddy
// and the OpenTelemetry collector builder):
//
//	package main
//
//	import (
//		"github.com/keelmq/keel/cli"
//		"github.com/keelmq/keel/sdk"
//		echo "github.com/keelmq/keel/sdk/examples/replication-echo"
//	)
//
//	func main() {
//		cli.Main(cli.WithPlugin(sdk.KindReplication, "echo", func() sdk.Plugin { return echo.New() }))
//	}
//
// cmd/keel is that main with no extra plugin. The subcommands:
//
//	serve --profile FILE [--data DIR] [--set key=value ...]
//	profile check FILE [--set key=value ...]
//	store inspect [--records N] [--from OFFSET] [--crc] DIR
//	store repair [--dry-run] DIR
//	query [--admin ADDR] (--topic T --key K | --id MSGID)
//	admin (status|promote|force-writes) [--admin ADDR]
//	bench --config FILE --out DIR [--quick]
//	version
//
// serve and profile check load plugins from one catalog: the builtins
// (internal/builtins) and every WithPlugin; a profile selects a
// compiled-in plugin by name as it does a builtin, and external plugins by
// path as always. store reads the store's files and query and admin call a
// running node's admin API: they load no plugin. bench runs the suite in
// this process with the same catalog when the main passes WithBench (for
// example clibench.InProcess()); otherwise it executes the keelbench
// binary found next to the executable or on PATH, which knows only the
// builtins. This package does not link the benchmark suite, so a main
// without clibench carries only the broker.
package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/keelmq/keel/host"
)

const usage = `keel — a RocketMQ-style storage engine with pluggable flushing, replication and indexing

usage:
  keel serve --profile FILE [--data DIR] [--set key=value ...]
  keel profile check FILE [--set key=value ...]
  keel store inspect [--records N] [--from OFFSET] [--crc] DIR
  keel store repair [--dry-run] DIR
  keel query [--admin ADDR] (--topic T --key K | --id MSGID)
  keel admin (status|promote|force-writes) [--admin ADDR]
  keel admin (topic|group|consumer|cluster) ...   (keel admin help: all of them)
  keel bench --config FILE --out DIR [--quick]
  keel version
`

// app is one command line's settings, after the options.
type app struct {
	catalog *host.Catalog
	version string
	stdout  io.Writer
	bench   BenchFunc
}

// Main runs the command line in os.Args with opts. It returns when the
// command succeeded; when it failed it prints "keel: " and the error on
// standard error and exits with status 1 (and `serve` exits with status 2
// when a second signal forces it out before the store closed). An invalid
// option (see WithPlugin) is such a failure, whatever the subcommand.
func Main(opts ...Option) {
	if err := Run(os.Args[1:], opts...); err != nil {
		fmt.Fprintln(os.Stderr, "keel:", err)
		os.Exit(1)
	}
}

// Run runs one command line, args being the arguments after the program
// name (os.Args[1:]), and returns its error. `serve` returns once the node
// it started has stopped after SIGTERM or SIGINT.
func Run(args []string, opts ...Option) error {
	a, err := newApp(opts)
	if err != nil {
		return err
	}
	return a.run(args)
}

func (a *app) run(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("missing command")
	}
	switch args[0] {
	case "serve":
		return a.serve(args[1:])
	case "profile":
		if len(args) < 2 || args[1] != "check" {
			return fmt.Errorf("usage: keel profile check FILE [--set key=value ...]")
		}
		return a.profileCheck(args[2:])
	case "store":
		if len(args) < 2 {
			return fmt.Errorf("usage: keel store (inspect|repair) ...")
		}
		switch args[1] {
		case "inspect":
			return a.storeInspect(args[2:])
		case "repair":
			return a.storeRepair(args[2:])
		}
		return fmt.Errorf("unknown store command %q (inspect, repair)", args[1])
	case "query":
		return a.query(args[1:])
	case "admin":
		return a.admin(args[1:])
	case "bench":
		return a.runBench(args[1:])
	case "version", "--version", "-v":
		fmt.Fprintln(a.stdout, "keel", a.version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(a.stdout, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
