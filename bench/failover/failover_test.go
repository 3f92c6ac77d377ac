package failover

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/matrix"
)

func TestMain(m *testing.M) {
	MaybeChild()
	os.Exit(m.Run())
}

// TestKeelFailover kills the master of a two-broker group under load, for
// both replication plugins, and pauses it under sync replication: a new master answers SEND_OK within the wait,
// the consumer resumes, and with sync replication no acknowledged message
// is lost.
func TestKeelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six keel processes")
	}
	for _, tc := range []struct{ repl, crash string }{{matrix.FailoverAsync, matrix.FailoverKill9}, {matrix.FailoverSync, matrix.FailoverKill9},
		{matrix.FailoverSync, matrix.FailoverPause}} {
		repl := tc.repl
		t.Run(repl+"/"+tc.crash, func(t *testing.T) {
			r, err := RunKeel(context.Background(), KeelSpec{Dir: t.TempDir(), Replication: repl, Crash: tc.crash, Producers: 4, BodyBytes: 64, Queues: 2,
				Before: time.Second, After: time.Second, MaxWait: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %+v", repl, *r)
			if r.FirstOKMs < 0 || r.FirstStoredMs < 0 || r.FirstStoredMs > r.FirstOKMs {
				t.Fatalf("first stored %v ms, first SEND_OK %v ms: want both, stored no later", r.FirstStoredMs, r.FirstOKMs)
			}
			if r.ConsumerResumeMs < 0 {
				t.Fatal("the consumer never received a message sent after the kill")
			}
			if r.Acked == 0 {
				t.Fatal("nothing acknowledged")
			}
			if repl == matrix.FailoverSync && r.AckedLost != 0 {
				t.Fatalf("sync replication lost %d of %d acknowledged messages", r.AckedLost, r.Acked)
			}
			noChildren(t, "after the run")
		})
	}
}

// TestNATSFailover shuts down the JetStream R3 stream leader's server
// under load: a publish is acknowledged again within the wait and no
// acknowledged message is lost.
func TestNATSFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server NATS cluster")
	}
	r, err := RunNATS(context.Background(), NATSSpec{Dir: t.TempDir(), Producers: 8, BodyBytes: 64, Before: time.Second, After: time.Second, MaxWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *r)
	if r.FirstOKMs < 0 || r.Acked == 0 {
		t.Fatalf("first ack %v ms after the shutdown, %d acked: want a new ack", r.FirstOKMs, r.Acked)
	}
	if r.AckedLost != 0 {
		t.Fatalf("JetStream R3 lost %d of %d acknowledged messages", r.AckedLost, r.Acked)
	}
	noChildren(t, "after the run")
}
