// Command keelbench is the benchmark suite's own binary, so that the broker
// binary carries only the broker. `keel bench ARGS` executes the keelbench
// found next to the keel executable (then on PATH) with ARGS; it can also
// be run directly:
//
//	keelbench --config configs/bench/quick.toml --out bench-out/quick --quick
//	go run ./bench/cmd/keelbench --config configs/bench/quick.toml --out bench-out/quick --quick
//
// The recovery workload's kill9 child re-executes this program
// (os.Executable) with the same arguments; bench.Main recognises it
// (recovery.MaybeChild) before anything else.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/keelmq/keel/bench"
)

func main() {
	err := bench.Main(os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		// --help: the flag package has printed the usage.
	default:
		fmt.Fprintln(os.Stderr, "keel bench:", err)
		os.Exit(1)
	}
}
