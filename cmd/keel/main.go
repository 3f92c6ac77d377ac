// Command keel is the keel broker binary: package cli's command line with
// the builtin plugins only. The benchmark suite is the keelbench binary,
// which `keel bench` executes from beside this one. A build with plugins
// of your own compiled in is a main like this one that passes them to
// cli.Main (docs/plugins.md, "Compiled-in builds").
package main

import "github.com/keelmq/keel/cli"

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { cli.Main(cli.WithVersion(version)) }
