// Command keel-index-hash is the hash index plugin (package indexhash) as
// an external go-plugin process. The host starts it when a profile names
// it with path = ".../keel-index-hash" in its [index] section; run by
// hand it says so and exits.
package main

import (
	indexhash "github.com/keelmq/keel/plugins/index-hash"
	"github.com/keelmq/keel/sdk"
)

func main() { sdk.Serve(indexhash.New()) }
