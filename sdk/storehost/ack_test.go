package storehost

import (
	"context"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
)

// TestNewAckPolicyDefaults: a policy that waits without a timeout gets the
// default; one that waits for nothing keeps 0.
func TestNewAckPolicyDefaults(t *testing.T) {
	p := NewAckPolicy(sdk.FlushPolicy{WaitFlush: true}, sdk.ReplicationPolicy{WaitReplicas: 1})
	if p.Flush.Timeout != DefaultFlushTimeout || p.Replication.Timeout != DefaultReplicationTimeout {
		t.Fatalf("defaults not filled: %+v", p)
	}
	p = NewAckPolicy(sdk.FlushPolicy{WaitFlush: true, Timeout: time.Second}, sdk.ReplicationPolicy{})
	if p.Flush.Timeout != time.Second || p.Replication.Timeout != 0 {
		t.Fatalf("explicit or unneeded timeouts changed: %+v", p)
	}
}

// TestAckRule is the acknowledgement rule, case by case, through both
// entry points: AckNow answers exactly when Ack would answer at once, with
// the same status; the in-sync check comes before any wait; the flush and
// replication waits end in their own timeout statuses; the replication
// wait's timeout counts from the call.
func TestAckRule(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name     string
		flush    sdk.FlushPolicy
		repl     sdk.ReplicationPolicy
		inSync   int
		flushed  bool // flushed offset past the record before the ack
		acked    bool // replicated offset past the record before the ack
		want     AckStatus
		waits    bool          // AckNow declines
		flushAt  time.Duration // when the test flushes (0: never), after the call
		slowest  time.Duration // the answer comes no later than this
		earliest time.Duration // and no earlier
	}{
		{name: "nothing to wait for", want: AckOK},
		{name: "flushed already", flush: sdk.FlushPolicy{WaitFlush: true, Timeout: 50 * ms}, flushed: true, want: AckOK},
		{name: "flush times out", flush: sdk.FlushPolicy{WaitFlush: true, Timeout: 50 * ms}, want: AckFlushDiskTimeout,
			waits: true, earliest: 40 * ms, slowest: time.Second},
		{name: "flush arrives", flush: sdk.FlushPolicy{WaitFlush: true, Timeout: time.Second}, want: AckOK,
			waits: true, flushAt: 20 * ms, slowest: 900 * ms},
		{name: "too few in sync, before any flush wait", flush: sdk.FlushPolicy{WaitFlush: true, Timeout: time.Second},
			repl: sdk.ReplicationPolicy{WaitReplicas: 1, Timeout: time.Second}, inSync: 0, want: AckSlaveNotAvailable, slowest: 100 * ms},
		{name: "replicated already", repl: sdk.ReplicationPolicy{WaitReplicas: 1, Timeout: 50 * ms}, inSync: 1, acked: true, want: AckOK},
		{name: "none in sync, min 0: the master alone acks", repl: sdk.ReplicationPolicy{WaitReplicas: 1, Timeout: time.Second, AllowFewer: true},
			inSync: 0, want: AckOK, slowest: 100 * ms},
		{name: "none in sync, min 0, after the flush", flush: sdk.FlushPolicy{WaitFlush: true, Timeout: time.Second},
			repl: sdk.ReplicationPolicy{WaitReplicas: 1, Timeout: time.Second, AllowFewer: true}, inSync: 0, want: AckOK,
			waits: true, flushAt: 20 * ms, slowest: 900 * ms},
		{name: "fewer than min in sync", repl: sdk.ReplicationPolicy{WaitReplicas: 2, Timeout: time.Second, AllowFewer: true, MinReplicas: 1},
			inSync: 0, want: AckSlaveNotAvailable, slowest: 100 * ms},
		{name: "fewer than wait but min in sync: waits for them", repl: sdk.ReplicationPolicy{WaitReplicas: 2, Timeout: 200 * ms, AllowFewer: true, MinReplicas: 1},
			inSync: 1, want: AckFlushSlaveTimeout, waits: true, earliest: 180 * ms, slowest: 600 * ms},
		{name: "fewer than wait, min in sync, replicated", repl: sdk.ReplicationPolicy{WaitReplicas: 2, Timeout: 200 * ms, AllowFewer: true, MinReplicas: 1},
			inSync: 1, acked: true, want: AckOK},
		{name: "replication times out from the call", flush: sdk.FlushPolicy{WaitFlush: true, Timeout: time.Second},
			// From the call: ~400 ms; from the flush it would be ~700 ms.
			repl: sdk.ReplicationPolicy{WaitReplicas: 1, Timeout: 400 * ms}, inSync: 1, want: AckFlushSlaveTimeout,
			waits: true, flushAt: 300 * ms, earliest: 380 * ms, slowest: 650 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			h := New(s, nil)
			p := AckPolicy{Flush: tc.flush, Replication: tc.repl}
			end := s.Positions().Committed
			if tc.flushed {
				if _, err := s.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			st := sdk.ReplicationState{InSync: tc.inSync}
			if tc.acked {
				st.AckedOffset = end
			}
			if err := h.ReportReplication(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			now, ok := h.AckNow(p, end)
			if ok == tc.waits || (ok && now != tc.want) {
				t.Fatalf("AckNow = %v, %v; want waits=%v, status %v", now, ok, tc.waits, tc.want)
			}
			got := make(chan AckStatus, 2)
			start := time.Now()
			h.Ack(p, end, func(st AckStatus) { got <- st })
			if tc.flushAt > 0 {
				time.AfterFunc(tc.flushAt, func() { s.Flush() })
			}
			select {
			case st := <-got:
				el := time.Since(start)
				if st != tc.want {
					t.Fatalf("Ack = %v, want %v", st, tc.want)
				}
				if tc.slowest > 0 && el > tc.slowest || el < tc.earliest {
					t.Fatalf("Ack answered after %v, want within [%v, %v]", el, tc.earliest, tc.slowest)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Ack never answered")
			}
			select {
			case st := <-got:
				t.Fatalf("done called twice (second: %v)", st)
			case <-time.After(20 * ms):
			}
		})
	}
}
