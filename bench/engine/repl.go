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
// Policy may be called at any time, before Start too; Start is called
// once; Stop
// once, after the producers stopped, returning when every goroutine (and
// any slave store) is gone.
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

// ReplicationFactory makes a fresh Replication for one run; env is the
// same as Start will get.
type ReplicationFactory func(env ReplEnv) (Replication, error)

// ReplImpl is a registered replication implementation.
type ReplImpl struct {
	New  ReplicationFactory
	Impl string // what runs, for the report ("plugin")
}

var replReg = map[[2]string]ReplImpl{}

// RegisterReplication makes name (a replication axis value other than
// "none") in mode run with f; a later registration replaces an earlier one.
func RegisterReplication(name, mode, impl string, f ReplicationFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	replReg[[2]string{name, mode}] = ReplImpl{New: f, Impl: impl}
}

// LookupReplication returns the registered implementation.
func LookupReplication(name, mode string) (ReplImpl, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	r, ok := replReg[[2]string{name, mode}]
	return r, ok
}
