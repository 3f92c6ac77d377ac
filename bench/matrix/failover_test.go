package matrix

import (
	"strings"
	"testing"
	"time"
)

func TestFailoverSection(t *testing.T) {
	c, err := Parse("a.toml", []byte(minimal+"[failover]\nreplication = [\"async\", \"sync\"]\nnats = true\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Failover
	if !f.Enabled() || f.Producers != 8 || f.BodyBytes != 128 || f.Queues != 4 || f.Repeats != 3 || f.Before.D() != 5*time.Second ||
		f.After.D() != 5*time.Second || f.MaxWait.D() != 30*time.Second || f.HeartbeatTimeout != 0 || len(f.Crash) != 1 || f.Crash[0] != FailoverKill9 {
		t.Fatalf("defaults: %+v", f)
	}
	if c.FailoverRuns() != 9 {
		t.Errorf("FailoverRuns %d, want 9 (async, sync, nats × 3)", c.FailoverRuns())
	}
	q := c.Quick()
	if q.Failover.Repeats != 1 || q.Failover.Before.D() != time.Second || q.Failover.After.D() != time.Second || q.FailoverRuns() != 3 {
		t.Errorf("quick: %+v", q.Failover)
	}
	if c.Failover.Repeats != 3 {
		t.Error("Quick changed the original")
	}
	off, err := Parse("a.toml", []byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if off.Failover.Enabled() || off.FailoverRuns() != 0 {
		t.Errorf("no [failover]: %+v", off.Failover)
	}
}

func TestFailoverValidation(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"replication = [\"none\"]\n", "failover.replication"},
		{"replication = [\"sync\", \"sync\"]\n", "twice"},
		{"nats = true\ncrash = [\"reboot\"]\n", "failover.crash"},
		{"nats = true\nproducers = 5000\n", "failover.producers"},
		{"nats = true\nbefore = \"10ms\"\n", "failover.before"},
		{"nats = true\nmax_wait = \"1h\"\n", "failover.max_wait"},
		{"nats = true\nheartbeat_timeout = \"-1s\"\n", "failover.heartbeat_timeout"},
		{"nats = true\nrepeat = 2\n", "repeat"},
	} {
		_, err := Parse("a.toml", []byte(minimal+"[failover]\n"+tc.body), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one mentioning %q", tc.body, err, tc.want)
		}
	}
}
