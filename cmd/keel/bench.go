package main

import "github.com/keelmq/keel/bench"

// cmdBench runs the comparative benchmark suite: keel bench --config FILE
// --out DIR [--quick].
func cmdBench(args []string) error { return bench.Main(args) }
