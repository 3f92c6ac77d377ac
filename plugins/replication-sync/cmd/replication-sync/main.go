// Command replication-sync serves keel's sync replication plugin as an
// external go-plugin process: point a profile's [replication] path at the
// built binary.
package main

import (
	replicationsync "github.com/keelmq/keel/plugins/replication-sync"
	"github.com/keelmq/keel/sdk"
)

func main() { sdk.Serve(replicationsync.New()) }
