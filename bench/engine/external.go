package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	flushstrategies "github.com/keelmq/keel/plugins/flush-strategies"
	replicationasync "github.com/keelmq/keel/plugins/replication-async"
	replicationsync "github.com/keelmq/keel/plugins/replication-sync"
	"github.com/keelmq/keel/sdk"
)

// External plugin binaries of keel's own builtins, as `make build` puts
// them in bin/.
const (
	// FlushBinary serves every flush strategy: "-strategy <name>".
	FlushBinary = "keel-flush"
	// IndexBinary serves the "hash" index.
	IndexBinary = "keel-index-hash"
	// ReplicationBinaryPrefix + "async" or "sync".
	ReplicationBinaryPrefix = "replication-"
)

// keelReplicators are the builtin replication names keel ships binaries
// for.
var keelReplicators = []string{replicationasync.Name, replicationsync.Name}

// externalBinary is the binary (and its arguments) that runs keel's own
// builtin name of kind as an external plugin; ok is false for a name keel
// ships no binary for.
func externalBinary(kind sdk.Kind, name string) (bin string, args []string, ok bool) {
	switch {
	case kind == sdk.KindFlush && slices.Contains(flushstrategies.Names(), name):
		return FlushBinary, []string{"-strategy", name}, true
	case kind == sdk.KindReplication && slices.Contains(keelReplicators, name):
		return ReplicationBinaryPrefix + name, nil, true
	case kind == sdk.KindIndex && name == "hash":
		return IndexBinary, nil, true
	}
	return "", nil, false
}

// findPlugin looks for an external plugin binary in dirs, then next to the
// running executable, then in ./bin, then on PATH; missing, it fails with
// ErrUnavailable.
func findPlugin(name string, dirs []string) (string, error) {
	cands := append([]string(nil), dirs...)
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Dir(exe))
	}
	cands = append(cands, "bin")
	for _, d := range cands {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("external plugin %s not found in %v, next to this executable, in ./bin or on PATH (build it with `make build` or `go build -o bin/ ./plugins/...`): %w",
		name, dirs, ErrUnavailable)
}
