package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBrokerDoesNotLinkBench: the broker binary carries only the broker;
// the benchmark suite (and the peers it links: nats-server, the Redis
// client) lives in keelbench, which `keel bench` executes.
func TestBrokerDoesNotLinkBench(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed only %d packages: %q", len(deps), deps)
	}
	for _, p := range deps {
		for _, bad := range []string{"nats-server", "nats.go", "go-redis", "redis", "github.com/keelmq/keel/bench"} {
			if strings.Contains(p, bad) {
				t.Errorf("cmd/keel links %s (contains %q): the benchmark suite belongs in bench/cmd/keelbench", p, bad)
			}
		}
	}
}

var (
	keelbenchOnce sync.Once
	keelbenchPath string
	keelbenchErr  error
)

// keelbenchBin builds bench/cmd/keelbench once, beside keelBin's keel.
func keelbenchBin(t *testing.T) string {
	t.Helper()
	dir := filepath.Dir(keelBin(t))
	keelbenchOnce.Do(func() {
		keelbenchPath = filepath.Join(dir, "keelbench")
		out, err := exec.Command("go", "build", "-o", keelbenchPath, "../../bench/cmd/keelbench").CombinedOutput()
		if err != nil {
			keelbenchErr = errors.New("build keelbench: " + err.Error() + "\n" + string(out))
		}
	})
	if keelbenchErr != nil {
		t.Fatal(keelbenchErr)
	}
	return keelbenchPath
}

// placeBinary puts a copy (or hard link) of src at dst.
func placeBinary(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Link(src, dst); err == nil {
		return
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// runBench runs `exe bench args...` with PATH set to path only, stdin as
// given, and returns its exit code, stdout and stderr.
func runBench(t *testing.T, exe, path, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, append([]string{"bench"}, args...)...)
	cmd.Dir = t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+path)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("keel bench %v did not exit within 60s:\n%s%s", args, stdout.String(), stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run keel bench %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestBenchRunsKeelbench: `keel bench` becomes the keelbench next to it,
// with its arguments, standard streams and exit status; on PATH when not
// next to it; and one clear line when there is none.
func TestBenchRunsKeelbench(t *testing.T) {
	keel := keelBin(t)
	empty := t.TempDir()

	t.Run("real", func(t *testing.T) {
		dir := t.TempDir()
		placeBinary(t, keel, filepath.Join(dir, "keel"))
		placeBinary(t, keelbenchBin(t), filepath.Join(dir, "keelbench"))
		code, stdout, stderr := runBench(t, filepath.Join(dir, "keel"), empty, "", "--no-such-flag")
		if code != 1 || !strings.Contains(stderr, "flag provided but not defined: -no-such-flag") ||
			!strings.Contains(stderr, "-config") || !strings.Contains(stderr, "keel bench:") {
			t.Errorf("keel bench --no-such-flag: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
		code, stdout, stderr = runBench(t, filepath.Join(dir, "keel"), empty, "", "--help")
		if code != 0 || !strings.Contains(stderr, "-config") || !strings.Contains(stderr, "-skip") {
			t.Errorf("keel bench --help: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
	})

	// A stand-in keelbench shows exactly what it receives.
	const fake = "#!/bin/sh\nread line\necho \"argv0=$0 args=$* stdin=$line\"\necho to-stderr >&2\nexit 7\n"
	for _, where := range []string{"beside", "path"} {
		t.Run("fake-"+where, func(t *testing.T) {
			dir, binDir := t.TempDir(), t.TempDir()
			placeBinary(t, keel, filepath.Join(dir, "keel"))
			fakeDir := dir
			if where == "path" {
				fakeDir = binDir
			}
			fakePath := filepath.Join(fakeDir, "keelbench")
			if err := os.WriteFile(fakePath, []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runBench(t, filepath.Join(dir, "keel"), binDir, "hello\n", "--config", "a b.toml", "--quick")
			want := "argv0=" + fakePath + " args=--config a b.toml --quick stdin=hello\n"
			if code != 7 || stdout != want || stderr != "to-stderr\n" {
				t.Errorf("exit %d (want 7), stdout %q (want %q), stderr %q", code, stdout, want, stderr)
			}
		})
	}

	t.Run("missing", func(t *testing.T) {
		dir := t.TempDir()
		placeBinary(t, keel, filepath.Join(dir, "keel"))
		code, stdout, stderr := runBench(t, filepath.Join(dir, "keel"), empty, "", "--config", "x.toml")
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != 1 || stdout != "" || len(lines) != 1 || !strings.Contains(stderr, "keelbench") ||
			!strings.Contains(stderr, dir) || !strings.Contains(stderr, "make build") {
			t.Errorf("without keelbench: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
	})
}
