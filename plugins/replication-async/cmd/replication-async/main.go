// Command replication-async serves keel's async replication plugin as an
// external go-plugin process: point a profile's [replication] path at the
// built binary.
package main

import (
	replicationasync "github.com/keelmq/keel/plugins/replication-async"
	"github.com/keelmq/keel/sdk"
)

func main() { sdk.Serve(replicationasync.New()) }
