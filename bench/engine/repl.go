package engine

import (
	"context"
	"log/slog"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Replication is the replication side of a benchmark cell: started against
// the cell's master store after it opens, stopped before it closes. The
// master's storehost.Host receives ReportReplication calls, so acks and
// visibility follow Policy exactly as in the host process.
//
// Policy may be called at any time, before Start too; Start is called at
// most once; Stop exactly once, whether or not Start was called or
// succeeded (after the producers stopped), returning when every goroutine,
// slave store and external process it started is gone.
type Replication interface {
	Start(ctx context.Context, master *storehost.Host, env ReplEnv) error
	Policy() sdk.ReplicationPolicy
	Stop(ctx context.Context) error
}

// ReplEnv is what a Replication may use.
type ReplEnv struct {
	// SlaveDir is a directory (created by the Replication) for a slave
	// store on the same disk; StateDir an existing empty directory for the
	// replication's own files (plugins' DataDir).
	SlaveDir    string
	StateDir    string
	SegmentSize int64
	Logger      *slog.Logger
}
