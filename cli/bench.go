package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// keelbenchName is the benchmark suite's binary (bench/cmd/keelbench),
// which `make build` puts beside keel in bin/. The broker binary does not
// link the suite (nats-server, the Redis peer).
const keelbenchName = "keelbench"

// runBench is `keel bench --config FILE --out DIR [--quick] ...`. With
// WithBench it runs the suite in this process with the app's catalog.
// Otherwise it replaces this process with keelbench, found next to the
// running executable and then on PATH, with the same arguments,
// environment and standard streams, so its output, exit status and
// signals are keelbench's own, and the recovery workload's kill9 child
// (which re-executes os.Executable) is keelbench too. (In process, that
// child is this executable run with the same arguments, which reaches
// the suite again.)
func (a *app) runBench(args []string) error {
	if a.bench != nil {
		return a.bench(args, a.catalog)
	}
	path, err := findKeelbench()
	if err != nil {
		return err
	}
	argv := append([]string{path}, args...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("bench: exec %s: %w", path, err)
	}
	return nil // not reached
}

// findKeelbench looks for keelbench in the running executable's
// directory, then on PATH.
func findKeelbench() (string, error) {
	var dir string
	if exe, err := os.Executable(); err == nil {
		dir = filepath.Dir(exe)
		p := filepath.Join(dir, keelbenchName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(keelbenchName); err == nil {
		return filepath.Abs(p)
	}
	where := "on PATH"
	if dir != "" {
		where = "in " + dir + " or on PATH"
	}
	return "", fmt.Errorf("bench runs the %s binary, which is not %s: build it with `make build` (or `go build -o bin/ ./bench/cmd/keelbench`) and keep it next to keel",
		keelbenchName, where)
}
