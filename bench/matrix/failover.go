package matrix

import (
	"fmt"
	"slices"
	"time"
)

// FailoverConfig configures the failover part (package bench/failover):
// under load, the master of a two-broker keel group in cluster mode is
// killed with SIGKILL (per replication plugin), and beside it the stream
// leader of a NATS JetStream R3 cluster.
//
//	[failover]
//	replication       = ["async", "sync"]  # keel's side; empty: none
//	nats              = true               # JetStream R3 beside
//	crash             = ["kill9", "pause"] # SIGKILL, or SIGSTOP (a hung node); default ["kill9"]
//	producers         = 8
//	body_bytes        = 128
//	queues            = 4
//	before            = "5s"    # load before the kill
//	after             = "5s"    # load after the first ack from the new leader and the consumer's resume
//	max_wait          = "30s"   # give up waiting for them (from the kill)
//	heartbeat_timeout = ""      # controller.heartbeat_timeout; empty: keel's default
//	repeats           = 3
//
// The part is disabled when replication is empty and nats is false.
type FailoverConfig struct {
	// Replication lists the replication plugins of keel's runs,
	// FailoverAsync and/or FailoverSync.
	Replication []string `toml:"replication"`
	// NATS adds a JetStream R3 run beside keel's.
	NATS bool `toml:"nats"`
	// Crash lists the crash kinds, FailoverKill9 and/or FailoverPause.
	// Default [FailoverKill9].
	Crash []string `toml:"crash"`
	// Producers send one message at a time each. Default 8.
	Producers int `toml:"producers"`
	// BodyBytes is the body size. Default 128.
	BodyBytes int `toml:"body_bytes"`
	// Queues of keel's topic. Default 4.
	Queues int `toml:"queues"`
	// Before is the load before the kill, After the load once the new
	// leader acknowledged and the consumer resumed (or MaxWait passed).
	// Defaults 5s each.
	Before Duration `toml:"before"`
	After  Duration `toml:"after"`
	// MaxWait bounds the wait, from the kill, for both. Default 30s.
	MaxWait Duration `toml:"max_wait"`
	// HeartbeatTimeout is the controller's controller.heartbeat_timeout;
	// 0 keeps keel's default (keel's profile validation checks it).
	HeartbeatTimeout Duration `toml:"heartbeat_timeout"`
	// Repeats of every run; the report gives medians. Default 3.
	Repeats int `toml:"repeats"`
}

// Crash kinds of the failover part: the leader's process is killed
// (SIGKILL: its sockets close at once, so peers notice at once), or
// paused (SIGSTOP: a hung node or lost host; peers notice only through
// timeouts).
const (
	FailoverKill9 = "kill9"
	FailoverPause = "pause"
)

// Replication plugins of the failover part's keel runs.
const (
	FailoverAsync = "async"
	FailoverSync  = "sync"
)

// Enabled reports whether the part runs.
func (f FailoverConfig) Enabled() bool { return len(f.Replication) > 0 || f.NATS }

func (f *FailoverConfig) fill() {
	if len(f.Crash) == 0 {
		f.Crash = []string{FailoverKill9}
	}
	for _, d := range []struct {
		p *int
		v int
	}{{&f.Producers, 8}, {&f.BodyBytes, 128}, {&f.Queues, 4}, {&f.Repeats, 3}} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
	for _, d := range []struct {
		p *Duration
		v time.Duration
	}{{&f.Before, 5 * time.Second}, {&f.After, 5 * time.Second}, {&f.MaxWait, 30 * time.Second}} {
		if *d.p == 0 {
			*d.p = Duration(d.v)
		}
	}
}

func (f FailoverConfig) validate(bad func(string, ...any)) {
	allowed := []string{FailoverAsync, FailoverSync}
	for i, r := range f.Replication {
		if !slices.Contains(allowed, r) {
			bad("failover.replication: %q is not one of %q", r, allowed)
		} else if slices.Contains(f.Replication[:i], r) {
			bad("failover.replication: %q twice", r)
		}
	}
	kinds := []string{FailoverKill9, FailoverPause}
	for i, k := range f.Crash {
		if !slices.Contains(kinds, k) {
			bad("failover.crash: %q is not one of %q", k, kinds)
		} else if slices.Contains(f.Crash[:i], k) {
			bad("failover.crash: %q twice", k)
		}
	}
	check := func(key string, v, lo, hi int64) {
		if v < lo || v > hi {
			bad("failover.%s: %d, want %d to %d", key, v, lo, hi)
		}
	}
	check("producers", int64(f.Producers), 1, 1024)
	check("body_bytes", int64(f.BodyBytes), 1, 1<<20)
	check("queues", int64(f.Queues), 1, 256)
	check("repeats", int64(f.Repeats), 1, 100)
	span := func(key string, d Duration, lo, hi time.Duration) {
		if d.D() < lo || d.D() > hi {
			bad("failover.%s: %v, want %v to %v", key, d.D(), lo, hi)
		}
	}
	span("before", f.Before, 100*time.Millisecond, 10*time.Minute)
	span("after", f.After, 100*time.Millisecond, 10*time.Minute)
	span("max_wait", f.MaxWait, time.Second, 10*time.Minute)
	if f.HeartbeatTimeout < 0 {
		bad("failover.heartbeat_timeout: %v is negative", f.HeartbeatTimeout.D())
	}
}

// quick trims the part for --quick: one run each, at most 1s of load on
// either side of the kill.
func (f FailoverConfig) quick() FailoverConfig {
	f.Repeats = 1
	f.Before = Duration(min(f.Before.D(), time.Second))
	f.After = Duration(min(f.After.D(), time.Second))
	return f
}

// FailoverRuns is the number of progress steps of the part: one per run.
func (c *Config) FailoverRuns() int {
	f := c.Failover
	n := len(f.Replication)
	if f.NATS {
		n++
	}
	return n * len(f.Crash) * f.Repeats
}

// estimate is a lower bound of the part's time: the load around each kill.
func (f FailoverConfig) estimate(runs int) time.Duration {
	return time.Duration(runs) * (f.Before.D() + f.After.D())
}

// String describes the part in one line, for progress output.
func (f FailoverConfig) String() string {
	return fmt.Sprintf("failover %q nats=%v crash %q: p%d, %d B, %d queues, %v before, %v after, %d repeat(s)", f.Replication, f.NATS, f.Crash,
		f.Producers, f.BodyBytes, f.Queues, f.Before.D(), f.After.D(), f.Repeats)
}
