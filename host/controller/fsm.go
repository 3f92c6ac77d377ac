package controller

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// fsm is the raft.FSM over the replicated state. Apply, Snapshot and Restore are called
// by raft, never concurrently with each other; the read methods may be
// called from any goroutine.
type fsm struct {
	mu    sync.RWMutex
	state *replicated
}

func newFSM() *fsm { return &fsm{state: newState()} }

// Apply applies one committed entry and returns its applyResult (raft hands
// it to the leader's ApplyFuture.Response). Entries other than commands
// (configuration changes, barriers) never reach it.
func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.applyEntry(l.Data)
}

// Snapshot returns a point-in-time copy of the state, encoded at once so
// that Persist may run concurrently with later Applies.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.Marshal(f.state.encodable())
	if err != nil {
		return nil, fmt.Errorf("encoding controller snapshot: %w", err)
	}
	return snapshotBytes(b), nil
}

// Restore replaces the state with a snapshot's. On error the state is
// unchanged.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var ss snapshotState
	if err := json.NewDecoder(rc).Decode(&ss); err != nil {
		return fmt.Errorf("decoding controller snapshot: %w", err)
	}
	s, err := stateFrom(ss)
	if err != nil {
		return fmt.Errorf("restoring controller snapshot: %w", err)
	}
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	return nil
}

// read calls fn with the state under the read lock; fn must not keep it.
func (f *fsm) read(fn func(*replicated)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

type snapshotBytes []byte

func (b snapshotBytes) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return fmt.Errorf("writing controller snapshot: %w", err)
	}
	return sink.Close()
}

func (snapshotBytes) Release() {}
