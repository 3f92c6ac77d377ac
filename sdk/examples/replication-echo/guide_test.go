package echo_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// guide is the walk-through whose plugin follows this example.
const guide = "../../../docs/writing-a-replication-plugin.md"

// goFileRef is a file name in the guide's prose, such as `master.go`.
var goFileRef = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`")

// guideFiles returns the guide's Go code by file: each ```go block
// belongs to the last `*.go` file its prose named before it (blocks
// naming the same file are concatenated).
func guideFiles(md []byte) (map[string]string, error) {
	files := map[string]string{}
	var last, fence string
	var block strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case fence != "" && strings.HasPrefix(line, "```"):
			if fence == "go" {
				files[last] += block.String()
				block.Reset()
			}
			fence = ""
		case fence == "go":
			block.WriteString(line + "\n")
		case fence != "":
		case strings.HasPrefix(line, "```"):
			fence = strings.TrimPrefix(line, "```")
			if fence == "" {
				fence = "text"
			}
			if fence == "go" && last == "" {
				return nil, fmt.Errorf("%s:%d: a Go block before any file name", guide, n)
			}
		default:
			if m := goFileRef.FindAllStringSubmatch(line, -1); m != nil {
				last = m[len(m)-1][1]
			}
		}
	}
	return files, sc.Err()
}

// TestGuideCodeBuilds writes the guide's code into a module of its own,
// as a reader following the guide would (example.com/mirror, keel
// replaced by this checkout), and checks that it builds and vets and that
// its conformance test passes in-process, every fault included. It needs the go tool and the
// module cache keel builds from (no network: GOPROXY=off); -short skips it.
func TestGuideCodeBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not with -short")
	}
	md, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	files, err := guideFiles(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"config.go", "mirror.go", "master.go", "slave.go", "cmd/mirror/main.go", "mirror_test.go"} {
		if files[want] == "" {
			t.Fatalf("the guide has no code for %s (found %d files)", want, len(files))
		}
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	keelMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go [0-9.]+$`).Find(keelMod)
	if goLine == nil {
		t.Fatal("keel's go.mod has no go line")
	}
	// keel's own requirements, so that every module is at the version
	// keel's go.sum and the module cache hold: with them nothing needs
	// resolving, where go mod tidy would look up the test dependencies
	// of keel's dependencies, which the cache need not hold.
	reqs := regexp.MustCompile(`(?ms)^require \(.*?^\)$`).FindAll(keelMod, -1)
	if len(reqs) == 0 {
		t.Fatal("keel's go.mod has no require block")
	}
	mod := fmt.Sprintf("module example.com/mirror\n\n%s\n\nrequire github.com/keelmq/keel v0.0.0\n\n%s\n\nreplace github.com/keelmq/keel => %s\n",
		goLine, bytes.Join(reqs, []byte("\n\n")), root)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the guide's module: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("vet", "./...")
	// As the guide runs it, every fault included: mirror fences where
	// DivergentTail could repair, which the suite reports as safe.
	run("test", "-count=1", "-run", "^TestConformance$", ".")
}
