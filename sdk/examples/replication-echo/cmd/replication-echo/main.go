// Command replication-echo is the echo replication plugin as an external
// keel plugin binary. Point a profile's [replication] section at it:
//
//	[replication]
//	path = "bin/replication-echo"
//	role = "master"
//
//	[replication.config]
//	wait_replicas = 1
//	timeout = "3s"
package main

import (
	"github.com/keelmq/keel/sdk"
	echo "github.com/keelmq/keel/sdk/examples/replication-echo"
)

func main() { sdk.Serve(echo.New()) }
