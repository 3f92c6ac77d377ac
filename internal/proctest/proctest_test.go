package proctest

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestChildrenSeesAChild(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	kids, err := Children()
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	if !slices.ContainsFunc(kids, func(k string) bool { return strings.HasPrefix(k, pid+" (sleep)") }) {
		t.Fatalf("Children() = %v, want %s (sleep)", kids, pid)
	}
}
