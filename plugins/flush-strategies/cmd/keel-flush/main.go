// Command keel-flush serves one of keel's flush strategies (sync, async or
// buffered) as an external plugin over hashicorp/go-plugin, for
// profiles that load flush strategies out of process:
//
//	[flush]
//	path = "bin/keel-flush"
//
// The strategy is the first of: the -strategy flag, a first positional
// argument, the KEEL_FLUSH_STRATEGY environment variable, "sync". Its keys
// are read from [flush.config] exactly as the builtin reads them.
//
// Run by hand (without the host's handshake cookie) it prints that it is a
// plugin and exits with status 1.
package main

import (
	"flag"
	"fmt"
	"os"

	flushstrategies "github.com/keelmq/keel/plugins/flush-strategies"
	"github.com/keelmq/keel/sdk"
)

func main() {
	name := flag.String("strategy", "", "flush strategy: sync, async or buffered (default $KEEL_FLUSH_STRATEGY, else sync)")
	flag.Parse()
	chosen := *name
	if chosen == "" && flag.NArg() > 0 {
		chosen = flag.Arg(0)
	}
	if chosen == "" {
		chosen = os.Getenv("KEEL_FLUSH_STRATEGY")
	}
	if chosen == "" {
		chosen = flushstrategies.NameSync
	}
	s, err := flushstrategies.New(chosen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "keel-flush:", err)
		os.Exit(2)
	}
	sdk.Serve(s)
}
