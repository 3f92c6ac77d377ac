package host

import (
	"context"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// A slave's log trails its master's: a pull past the end of a queue as it
// knows it waits at its offset, never moves back; what it holds, and an
// offset below its min, are answered as usual. (These rows were the
// broker's trailing cases before the rule got its one home in
// GetMessages.)
func TestGetMessagesOnSlaveNeverMovesBack(t *testing.T) {
	n, _ := testNode(t)
	b := backend{n}
	recs := appendN(t, n, "SQ", 5)
	waitDispatched(t, n, recs[len(recs)-1].End())
	n.slave.Store(true)
	for _, tc := range []struct {
		topic  string
		offset int64
		status core.GetStatus
		next   int64
	}{
		{"SQ", 2, core.Found, 5},
		{"SQ", 5, core.OffsetOverflowOne, 5},
		{"SQ", 500, core.NotYetVisible, 500},  // beyond its max: not moved to 5
		{"NOQ", 200, core.NotYetVisible, 200}, // a queue it does not have yet
	} {
		res, err := b.GetMessages(context.Background(), tc.topic, 0, tc.offset, 32, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != tc.status || res.NextOffset != tc.next {
			t.Fatalf("slave %s@%d: %v next %d, want %v %d", tc.topic, tc.offset, res.Status, res.NextOffset, tc.status, tc.next)
		}
	}
	n.slave.Store(false)
	if res, _ := b.GetMessages(context.Background(), "SQ", 0, 500, 32, 1<<20, nil); res.Status != core.OffsetOverflowBadly || res.MaxOffset != 5 {
		t.Fatalf("master at 500: %v max %d, want OFFSET_OVERFLOW_BADLY max 5", res.Status, res.MaxOffset)
	}
}

func TestBeyondEnd(t *testing.T) {
	for _, tc := range []struct {
		offset int64
		res    core.GetResult
		want   bool
	}{
		{500, core.GetResult{Status: core.OffsetOverflowBadly, NextOffset: 256}, true},
		{200, core.GetResult{Status: core.NoMatchedLogicQueue}, true},
		{0, core.GetResult{Status: core.NoMatchedLogicQueue}, false},
		{1, core.GetResult{Status: core.OffsetTooSmall, NextOffset: 5}, false},
		{4, core.GetResult{Status: core.NoMessageInQueue, NextOffset: 10}, false}, // drained queue below min still moves
		{12, core.GetResult{Status: core.NoMessageInQueue, NextOffset: 10}, true},
		{10, core.GetResult{Status: core.OffsetOverflowOne, NextOffset: 10}, false},
	} {
		if got := beyondEnd(tc.res, tc.offset); got != tc.want {
			t.Errorf("beyondEnd(%v next %d, %d) = %v, want %v", tc.res.Status, tc.res.NextOffset, tc.offset, got, tc.want)
		}
	}
}

func woken(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// Held pulls are keyed by queue: a dispatch to queue A does not wake a
// pull held on queue B, which still wakes when B gets data.
func TestWaitForDataKeyedByQueue(t *testing.T) {
	n, _ := testNode(t)
	b := backend{n}
	put := func(topic string, q int32) int64 {
		r, err := n.store.Append(&record.Message{Topic: topic, QueueID: q, Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		waitDispatched(t, n, r.End())
		return r.QueueOffset
	}
	put("A", 0)
	put("B", 0)
	// Data already there: answered at once, nothing held.
	if ch, stop := b.WaitForData("A", 0, 0); !woken(ch, 0) {
		t.Fatal("wait at an offset the queue holds was not closed at once")
	} else {
		stop()
	}
	chB, stopB := b.WaitForData("B", 0, 1)
	defer stopB()
	chA, stopA := b.WaitForData("A", 0, 1)
	defer stopA()
	for range 3 {
		put("A", 0)
	}
	if !woken(chA, 5*time.Second) {
		t.Fatal("the wait on A was not woken by A's data")
	}
	// Three dispatches to A and one to another queue of B's topic:
	// none is B's.
	put("B", 1)
	if woken(chB, 200*time.Millisecond) {
		t.Fatal("a dispatch to another queue woke the wait on B/0")
	}
	put("B", 0)
	if !woken(chB, 5*time.Second) {
		t.Fatal("the wait on B/0 was not woken by B/0's data")
	}
}

// A stopped wait leaves the table, and the watcher exits with the last
// one.
func TestWaitForDataStopReleases(t *testing.T) {
	n, _ := testNode(t)
	b := backend{n}
	_, stop1 := b.WaitForData("Q", 0, 0)
	_, stop2 := b.WaitForData("Q", 0, 0)
	stop1()
	n.pulls.mu.Lock()
	held := len(n.pulls.stores[n.store])
	n.pulls.mu.Unlock()
	if held != 1 {
		t.Fatalf("after one of two waits stopped: %d queues held, want 1", held)
	}
	stop2()
	n.pulls.mu.Lock()
	held = len(n.pulls.stores[n.store])
	n.pulls.mu.Unlock()
	if held != 0 {
		t.Fatalf("after both waits stopped: %d queues held, want 0", held)
	}
	// The watcher leaves at its next signal; a new wait starts another.
	r, err := n.store.Append(&record.Message{Topic: "Q", Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, n, r.End())
	ch, stop := b.WaitForData("Q", 0, 1)
	defer stop()
	if _, err := n.store.Append(&record.Message{Topic: "Q", Body: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if !woken(ch, 5*time.Second) {
		t.Fatal("a wait after the table emptied was not woken")
	}
}
