package wire

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/host/remoting"
)

var profileDir = filepath.Join("..", "..", "configs", "profiles")

// TestEndToEnd runs the generator against a real keel node under both
// shipped profiles the benchmark uses and checks that every acknowledged
// message is in the store.
func TestEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		profile string
		code    int16
	}{{"default", remoting.CodeSendMessage}, {"sync-flush", remoting.CodeSendMessage}, {"default", remoting.CodeSendMessageV2}} {
		t.Run(tc.profile, func(t *testing.T) {
			path, err := FindProfile(tc.profile, profileDir)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			n, err := StartNode(ctx, NodeSpec{Profile: path, Dir: t.TempDir(), SegmentSize: 64 << 20, Queues: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Stop(ctx)
			ls := LoadSpec{Addr: n.Addr("broker"), Queues: 4, Producers: 8, Conns: 2, Depth: 4, BodyBytes: 128,
				Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond, Code: tc.code}
			if err := prime(ctx, ls); err != nil {
				t.Fatal(err)
			}
			r, err := Load(ctx, ls)
			if err != nil {
				t.Fatal(err)
			}
			if r.Statuses[StatusOK] == 0 || r.Errors != 0 || r.Unmatched != 0 {
				t.Fatalf("statuses %v, errors %d (%s), unmatched %d", r.Statuses, r.Errors, r.FirstError, r.Unmatched)
			}
			// Every stored message, warmup and priming included, is in a
			// queue of the topic once dispatch caught up (acks under async
			// flush do not wait for it).
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			for p := n.Store().Positions(); p.Dispatched < p.Committed; p = n.Store().Positions() {
				if _, err := n.Store().WaitDispatched(dctx, p.Dispatched); err != nil {
					t.Fatalf("dispatch stuck at %+v: %v", p, err)
				}
			}
			cancel()
			var inQueues int64
			for q := int32(0); q < 4; q++ {
				inQueues += n.Store().MaxQueueOffset(DefaultTopic, q)
			}
			if inQueues < r.Msgs+1 {
				t.Fatalf("queues hold %d messages, the generator counted %d acks in the window", inQueues, r.Msgs)
			}
			t.Logf("%s code %d: %.0f msgs/s, p50 %v, p99 %v, %d in queues", tc.profile, tc.code, r.MsgsPerSec,
				time.Duration(r.Latency.Quantile(0.5)), time.Duration(r.Latency.Quantile(0.99)), inQueues)
		})
	}
}

// TestRun covers Run's start, priming, load and stop, and the builtin
// registration's tolerance of an existing catalog.
func TestRun(t *testing.T) {
	path, err := FindProfile("default", profileDir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), Spec{Node: NodeSpec{Profile: path, Dir: filepath.Join(t.TempDir(), "node"), Queues: 2},
		Load: LoadSpec{Producers: 2, BodyBytes: 32, Duration: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Msgs == 0 {
		t.Fatalf("no messages: %+v", r)
	}
}

func TestFindProfile(t *testing.T) {
	if _, err := FindProfile("no-such-profile", profileDir); err == nil {
		t.Fatal("found a missing profile")
	}
	p, err := FindProfile("sync-flush", profileDir)
	if err != nil {
		t.Fatal(err)
	}
	if q, err := FindProfile(p); err != nil || q != p {
		t.Fatalf("a path: %q, %v", q, err)
	}
	if _, err := FindProfile(filepath.Join(t.TempDir(), "x.toml")); err == nil {
		t.Fatal("a missing path was accepted")
	}
}

// TestRunPart runs the wire part on a tiny config: keel beside NATS
// JetStream r1-default (in-process and over TCP) and the protocol floor,
// and a profile that does not exist.
func TestRunPart(t *testing.T) {
	yes := true
	w := matrix.WireConfig{Profiles: []string{"default", "no-such-profile"}, Producers: []int{4}, Connections: 2, Depth: 4,
		BodyBytes: []int{64}, SegmentSize: 16 << 20, NATS: &yes, Duration: matrix.Duration(100 * time.Millisecond), Repeats: 2}
	steps, skips := 0, 0
	rows := RunPart(context.Background(), w, PartOptions{Scratch: t.TempDir(), Warmup: 10 * time.Millisecond, Queues: 2,
		ProfileDirs: []string{profileDir}, Step: func(string) { steps++ }, Skip: func(n int) { skips += n }})
	if len(rows) != 5 {
		t.Fatalf("rows: %+v", rows)
	}
	keel, missing, nats, natsTCP, floor := rows[0], rows[1], rows[2], rows[3], rows[4]
	if floor.Name != FloorName || floor.Profile != FloorProfile || floor.Status != "ok" || len(floor.Runs) != 2 || floor.Statuses[StatusOK] == 0 ||
		floor.RatioToNATS != floor.MsgsPerSec/nats.MsgsPerSec || floor.RatioToFloor != 0 {
		t.Errorf("floor row: %+v", floor)
	}
	if keel.FloorMsgsPerSec != floor.MsgsPerSec || keel.RatioToFloor != keel.MsgsPerSec/floor.MsgsPerSec {
		t.Errorf("ratio to the floor: keel %v, floor %v, ratio %v", keel.MsgsPerSec, keel.FloorMsgsPerSec, keel.RatioToFloor)
	}
	if keel.Name != "keel" || keel.Status != "ok" || len(keel.Runs) != 2 || keel.Statuses[StatusOK] == 0 || keel.P99us <= 0 {
		t.Errorf("keel row: %+v", keel)
	}
	if nats.Name != "nats-jetstream" || nats.Profile != NATSConfig || nats.Status != "ok" || nats.MsgsPerSec <= 0 {
		t.Errorf("nats row: %+v", nats)
	}
	if natsTCP.Name != "nats-jetstream" || natsTCP.Profile != NATSTCPConfig || natsTCP.Status != "ok" || natsTCP.MsgsPerSec <= 0 ||
		!strings.Contains(natsTCP.Note, "over TCP") || strings.Contains(nats.Note, "over TCP") {
		t.Errorf("nats over TCP row: %+v", natsTCP)
	}
	if keel.NATSMsgsPerSec != nats.MsgsPerSec || keel.RatioToNATS != keel.MsgsPerSec/nats.MsgsPerSec {
		t.Errorf("ratio: keel %v, nats %v, ratio %v", keel.MsgsPerSec, keel.NATSMsgsPerSec, keel.RatioToNATS)
	}
	if keel.NATSTCPMsgsPerSec != natsTCP.MsgsPerSec || keel.RatioToNATSTCP != keel.MsgsPerSec/natsTCP.MsgsPerSec {
		t.Errorf("ratio over TCP: keel %v, nats %v, ratio %v", keel.MsgsPerSec, keel.NATSTCPMsgsPerSec, keel.RatioToNATSTCP)
	}
	if missing.Status != "error" || missing.RatioToNATS != 0 || missing.RatioToFloor != 0 {
		t.Errorf("missing profile row: %+v", missing)
	}
	// Every run is either stepped (result or failure) or skipped.
	if steps+skips != Runs(w) || skips != 2 {
		t.Errorf("steps %d + skips %d, want %d runs with 2 skipped", steps, skips, Runs(w))
	}
	t.Logf("keel %.0f msgs/s, nats %.0f msgs/s, ratio %.2f", keel.MsgsPerSec, nats.MsgsPerSec, keel.RatioToNATS)
}
