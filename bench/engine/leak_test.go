package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/internal/proctest"
	"github.com/keelmq/keel/sdk"
)

// children lists this test process's child processes (proctest.Children).
func children(t *testing.T) []string {
	t.Helper()
	kids, err := proctest.Children()
	if err != nil {
		t.Fatal(err)
	}
	return kids
}

// TestFailedSetUpLeavesNoProcess fails a cell's set-up on purpose after an
// external flush strategy (a keel-flush process) has been started: the
// replication is a declared binary that is not a plugin. The run fails and
// no child process of the test remains.
func TestFailedSetUpLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds keel-flush")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, FlushBinary), "github.com/keelmq/keel/plugins/flush-strategies/cmd/keel-flush")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build keel-flush: %v\n%s", err, out)
	}
	notPlugin := filepath.Join(dir, "not-a-plugin")
	if err := os.WriteFile(notPlugin, []byte("#!/bin/sh\necho not a keel plugin\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if before := children(t); len(before) > 0 {
		t.Fatalf("child processes before the run: %v", before)
	}
	cell := matrix.Cell{Workload: "produce", Flush: "sync", Replication: "broken", Index: "none", Mode: matrix.ModeExternal, BodyBytes: 16, Producers: 1}
	flush := matrix.Builtin(sdk.KindFlush, "sync", matrix.ModeExternal)
	repl := matrix.Plugin{Name: "broken", PluginDecl: matrix.PluginDecl{Kind: "replication", Path: notPlugin, Mode: matrix.ModeExternal}, Declared: true}
	_, err := Run(context.Background(), Spec{Cell: cell, Plugins: matrix.CellPlugins{Flush: flush, Replication: &repl},
		Loader: &Loader{PluginDirs: []string{dir}}, Dir: filepath.Join(t.TempDir(), "cell"), Duration: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("Run: err %v, want the replication's set-up error", err)
	}
	// go-plugin's Kill waits for the process; allow a moment for the
	// kernel's bookkeeping all the same.
	deadline := time.Now().Add(2 * time.Second)
	for left := children(t); len(left) > 0; left = children(t) {
		if time.Now().After(deadline) {
			t.Fatalf("child processes left after a failed set-up: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
