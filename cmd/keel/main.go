// Command keel is the keel broker binary (the benchmark suite is keelbench;
// `keel bench` runs it from beside this binary).
//
//	keel serve --profile FILE [--data DIR] [--set key=value ...]
//	keel profile check FILE [--set key=value ...]
//	keel store inspect [--records N] [--from OFFSET] [--crc] DIR
//	keel store repair [--dry-run] DIR
//	keel query --admin ADDR (--topic T --key K | --id MSGID)
//	keel admin (status|promote|force-writes) --admin ADDR
//	keel bench --config FILE --out DIR [--quick]
//	keel version
package main

import (
	"flag"
	"fmt"
	"os"
)

const usage = `keel — a RocketMQ-style storage engine with pluggable flushing, replication and indexing

usage:
  keel serve --profile FILE [--data DIR] [--set key=value ...]
  keel profile check FILE [--set key=value ...]
  keel store inspect [--records N] [--from OFFSET] [--crc] DIR
  keel store repair [--dry-run] DIR
  keel query [--admin ADDR] (--topic T --key K | --id MSGID)
  keel admin (status|promote|force-writes) [--admin ADDR]
  keel bench --config FILE --out DIR [--quick]
  keel version
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "keel:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("missing command")
	}
	switch args[0] {
	case "serve":
		return cmdServe(args[1:])
	case "profile":
		if len(args) < 2 || args[1] != "check" {
			return fmt.Errorf("usage: keel profile check FILE [--set key=value ...]")
		}
		return cmdProfileCheck(args[2:])
	case "store":
		if len(args) < 2 {
			return fmt.Errorf("usage: keel store (inspect|repair) ...")
		}
		switch args[1] {
		case "inspect":
			return cmdStoreInspect(args[2:])
		case "repair":
			return cmdStoreRepair(args[2:])
		}
		return fmt.Errorf("unknown store command %q (inspect, repair)", args[1])
	case "query":
		return cmdQuery(args[1:])
	case "admin":
		return cmdAdmin(args[1:])
	case "bench":
		return cmdBench(args[1:])
	case "version", "--version", "-v":
		fmt.Println("keel", version)
		return nil
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// parseArgs parses flags that may come before or after the positional
// arguments (Go's flag package stops at the first positional one) and
// returns the positional arguments.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
