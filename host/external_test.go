package host

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmq/keel/sdk"
)

// TestCheckPluginBinary: loading errors name the profile key to fix, the
// binary's path and, for a pin that does not match, both digests and the
// line to put in the profile.
func TestCheckPluginBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "keel-repl")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(bin)
	actual := fmt.Sprintf("%x", sha256.Sum256(b))
	pinned := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, path, pin string
		want            []string
	}{
		{"ok", bin, actual, nil},
		{"missing", filepath.Join(dir, "nope"), "", []string{"replication.path:", filepath.Join(dir, "nope") + " not found", "go build -o " + filepath.Join(dir, "nope")}},
		{"mismatch", bin, pinned, []string{"replication.sha256:", bin, "has sha256 " + actual, "the profile pins " + pinned, `set replication.sha256 = "` + actual + `" in the profile`, "rebuild"}},
	} {
		err := checkPluginBinary(sdk.KindReplication, tc.path, tc.pin)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
	}
}
