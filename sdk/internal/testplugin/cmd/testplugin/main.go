// Command testplugin serves one of package testplugin's plugins, chosen by
// its first argument (sync-flush, async-flush, mem-index, probe), as an
// external keel plugin.
package main

import (
	"fmt"
	"os"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/internal/testplugin"
)

func main() {
	var p sdk.Plugin
	switch arg(1) {
	case "sync-flush":
		p = testplugin.NewSyncFlush()
	case "async-flush":
		p = testplugin.NewAsyncFlush()
	case "mem-index":
		p = testplugin.NewMemIndex()
	case "probe":
		p = testplugin.NewProbe()
	default:
		fmt.Fprintln(os.Stderr, "usage: testplugin sync-flush|async-flush|mem-index|probe")
		os.Exit(2)
	}
	sdk.Serve(p)
}

func arg(i int) string {
	if len(os.Args) > i {
		return os.Args[i]
	}
	return ""
}
