package failover

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/matrix"
)

// children lists the processes whose parent is this test process, zombies
// included, as "pid (comm) state".
func children(t *testing.T) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) >= 2 && fields[1] == self {
			out = append(out, strings.TrimSpace(string(b[:i+1]))+" "+fields[0])
		}
	}
	return out
}

func noChildren(t *testing.T, when string) {
	t.Helper()
	if left := children(t); len(left) > 0 {
		t.Fatalf("child processes left %s: %v", when, left)
	}
}

// TestNoProcessLeft cancels keel and NATS runs at several points (during
// start-up, before the kill, after it): each returns the context's error
// and leaves no child process behind.
func TestNoProcessLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("starts keel and NATS processes")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	noChildren(t, "before the runs")
	for _, after := range []time.Duration{300 * time.Millisecond, 2 * time.Second, 4500 * time.Millisecond, 7 * time.Second} {
		ctx, cancel := context.WithTimeout(context.Background(), after)
		_, err := RunKeel(ctx, KeelSpec{Dir: t.TempDir(), Replication: matrix.FailoverSync, Producers: 2, BodyBytes: 16, Queues: 1,
			Before: 3 * time.Second, After: 10 * time.Second, MaxWait: 30 * time.Second})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("keel run cancelled after %v: err %v, want the context's", after, err)
		}
		noChildren(t, "after a keel run cancelled after "+after.String())
		ctx, cancel = context.WithTimeout(context.Background(), after)
		_, err = RunNATS(ctx, NATSSpec{Dir: t.TempDir(), Producers: 2, BodyBytes: 16, Before: 3 * time.Second, After: 10 * time.Second,
			MaxWait: 30 * time.Second})
		cancel()
		if err == nil {
			t.Errorf("nats run cancelled after %v succeeded", after)
		}
		noChildren(t, "after a NATS run cancelled after "+after.String())
	}
}
