// Command keelbench runs the benchmark suite on its own; it is what
// `keel bench` runs (cmd/keel forwards to bench.Main), usable before and
// without the rest of the keel binary:
//
//	go run ./bench/cmd/keelbench --config configs/bench/quick.toml --out bench-out/quick --quick
package main

import (
	"fmt"
	"os"

	"github.com/keelmq/keel/bench"
)

func main() {
	if err := bench.Main(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "keel bench:", err)
		os.Exit(1)
	}
}
