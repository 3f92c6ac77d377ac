package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// keelBin is the keel binary TestMain built; repoRoot is the module root.
var keelBin, repoRoot string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test skips itself; do not pay for a build.
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := findRepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "keel-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir for the keel binary:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	keelBin = filepath.Join(dir, "keel")
	cmd := exec.Command("go", "build", "-o", keelBin, "./cmd/keel")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/keel in %s: %v\n%s", root, err, out)
		return 1
	}
	rlog.SetLogger(clientLog)
	return m.Run()
}

// findRepoRoot walks up from the working directory to the go.mod of
// module github.com/keelmq/keel.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/keelmq/keel\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/keelmq/keel above the working directory")
		}
		dir = parent
	}
}

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: starts keel processes and a real RocketMQ client (skipped with -short)")
	}
}

// clientLogger receives rocketmq-client-go's log lines (rlog is global to
// the process). It keeps the last warnings and errors in memory so that a
// failing test can show them, and echoes them to stderr when
// KEEL_E2E_CLIENT_LOG is set.
type clientLogger struct {
	mu    sync.Mutex
	lines []clientLine
	echo  bool
}

type clientLine struct {
	at   time.Time
	line string
}

var clientLog = &clientLogger{echo: os.Getenv("KEEL_E2E_CLIENT_LOG") != ""}

const clientLogKeep = 400

func (l *clientLogger) add(level, msg string, fields map[string]interface{}) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	now := time.Now()
	fmt.Fprintf(&b, "%s client %s: %s", now.Format("15:04:05.000"), level, msg)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, fields[k])
	}
	line := b.String()
	l.mu.Lock()
	l.lines = append(l.lines, clientLine{now, line})
	if len(l.lines) > clientLogKeep {
		l.lines = l.lines[len(l.lines)-clientLogKeep:]
	}
	l.mu.Unlock()
	if l.echo {
		fmt.Fprintln(os.Stderr, line)
	}
}

// since returns the kept lines logged at or after t0.
func (l *clientLogger) since(t0 time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if !s.at.Before(t0) {
			out = append(out, s.line)
		}
	}
	return out
}

func (l *clientLogger) Debug(string, map[string]interface{}) {}
func (l *clientLogger) Info(string, map[string]interface{})  {}
func (l *clientLogger) Warning(msg string, fields map[string]interface{}) {
	l.add("WARN", msg, fields)
}
func (l *clientLogger) Error(msg string, fields map[string]interface{}) {
	l.add("ERROR", msg, fields)
}
func (l *clientLogger) Fatal(msg string, fields map[string]interface{}) {
	l.add("FATAL", msg, fields)
}
func (l *clientLogger) Level(string)            {}
func (l *clientLogger) OutputPath(string) error { return nil }
