package replication

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// StateFile is the name of the file a Node keeps in sdk.Config.DataDir.
const StateFile = "replication-state.json"

// NodeState is what a Node remembers across restarts, besides the log and
// its epoch history (which the store keeps).
type NodeState struct {
	// Role is the role the node last ran in ("master" or "slave"); a node
	// that starts as master after running as slave takes over (its new
	// epoch is a takeover epoch).
	Role string `json:"role"`
	// MaxEpoch is the highest epoch the node has seen anywhere, so that a
	// new epoch it begins is greater than every epoch it knows of.
	MaxEpoch int32 `json:"max_epoch"`
	// Takeovers lists the epochs known to have begun by a takeover
	// (Promote, ForceWrites, slave reconfigured as master).
	Takeovers []int32 `json:"takeovers"`
}

// stateStore persists a NodeState atomically (temporary file, fsync,
// rename, fsync of the directory). With no directory it only keeps the
// state in memory.
type stateStore struct {
	mu   sync.Mutex
	path string
	st   NodeState
}

func openState(dir string) (*stateStore, error) {
	s := &stateStore{}
	if dir == "" {
		return s, nil
	}
	s.path = filepath.Join(dir, StateFile)
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read replication state: %w", err)
	}
	if err := json.Unmarshal(b, &s.st); err != nil {
		return nil, fmt.Errorf("replication state %s is damaged (delete it to start over; takeover knowledge is then lost): %w", s.path, err)
	}
	return s, nil
}

func (s *stateStore) get() NodeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Takeovers = slices.Clone(st.Takeovers)
	return st
}

// update applies f and persists the result if it changed.
func (s *stateStore) update(f func(*NodeState)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.st
	next.Takeovers = slices.Clone(s.st.Takeovers)
	f(&next)
	slices.Sort(next.Takeovers)
	next.Takeovers = slices.Compact(next.Takeovers)
	if next.Role == s.st.Role && next.MaxEpoch == s.st.MaxEpoch && slices.Equal(next.Takeovers, s.st.Takeovers) {
		return nil
	}
	if s.path != "" {
		b, err := json.MarshalIndent(next, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(s.path, b); err != nil {
			return fmt.Errorf("persist replication state: %w", err)
		}
	}
	s.st = next
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
