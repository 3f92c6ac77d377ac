package failover

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/internal/proctest"
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
