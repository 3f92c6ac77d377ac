package remoting

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
)

// The tests in this file pin the broker's side of ReadAccess: a node whose
// log may be behind a replica never answers reads from what it lacks and
// never lets a consumer offset go down (docs/architecture.md, "Reads on a
// node that may be behind").

var fenced = ReadAccess{Refused: "reads fenced by replication: master started with an empty log"}

// fencedEnv is a broker over a fake store holding 10 messages on FQ/0 with
// group G committed at 7, then fenced.
func fencedEnv(t *testing.T) (*brokerEnv, *testClient) {
	t.Helper()
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	for i := range 10 {
		if r := e.send(t, c, "FQ", 0, strconv.Itoa(i), ""); r.Code != Success {
			t.Fatalf("send: %+v", r)
		}
	}
	if err := e.be.CommitConsumerOffset("G", "FQ", 0, 7); err != nil {
		t.Fatal(err)
	}
	e.be.setAccess(fenced)
	return e, c
}

func expectBusy(t *testing.T, what string, r *Command) {
	t.Helper()
	if r.Code != SystemBusy {
		t.Fatalf("%s on a fenced node: code %d remark %q ext %v, want SYSTEM_BUSY (%d)", what, r.Code, r.Remark, r.ExtFields, SystemBusy)
	}
	if !strings.Contains(r.Remark, fenced.Refused) {
		t.Fatalf("%s: remark %q does not say why (%q)", what, r.Remark, fenced.Refused)
	}
	if _, ok := r.ExtFields.Get("nextBeginOffset"); ok {
		t.Fatalf("%s: a refused answer carries nextBeginOffset %s", what, r.Ext("nextBeginOffset"))
	}
}

func TestFencedPullRefusedWithoutMovingConsumer(t *testing.T) {
	_, c := fencedEnv(t)
	// Offsets inside, at and beyond the log, and a queue the node does
	// not have: none is answered from the log.
	for _, tc := range []struct {
		topic  string
		offset int64
	}{{"FQ", 3}, {"FQ", 10}, {"FQ", 500}, {"FQ", 0}, {"NOPE", 200}} {
		ext := pullExt("G", tc.topic, 0, tc.offset, 0)
		ext["sysFlag"] = "0"
		expectBusy(t, fmt.Sprintf("pull %s@%d", tc.topic, tc.offset), c.call(CodePullMessage, ext, nil))
	}
	// A long-polling pull is refused at once, not held.
	start := time.Now()
	expectBusy(t, "long-polling pull", c.call(CodePullMessage, pullExt("G", "FQ", 0, 10, 5000), nil))
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a refused long poll was held %v", d)
	}
}

func TestFencedHeldPullRefusedWhenFenceRises(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	e.send(t, c, "HQ", 0, "x", "")
	ch := c.start(&Command{Code: CodePullMessage, ExtFields: FieldsOf(pullExt("G", "HQ", 0, 1, 10000))})
	time.Sleep(100 * time.Millisecond) // the pull is held: caught up
	e.be.setAccess(fenced)
	e.send(t, c, "HQ", 0, "y", "") // wakes the held pull
	select {
	case r := <-ch:
		expectBusy(t, "held pull after the fence rose", r)
	case <-time.After(5 * time.Second):
		t.Fatal("held pull not answered")
	}
}

func TestFencedOffsetQueriesRefused(t *testing.T) {
	_, c := fencedEnv(t)
	q := map[string]string{"consumerGroup": "G", "topic": "FQ", "queueId": "0"}
	expectBusy(t, "QUERY_CONSUMER_OFFSET (committed group)", c.call(CodeQueryConsumerOffset, q, nil))
	// A group with no offset on an empty queue is not "0, SUCCESS" either.
	expectBusy(t, "QUERY_CONSUMER_OFFSET (unknown group, unknown queue)",
		c.call(CodeQueryConsumerOffset, map[string]string{"consumerGroup": "G2", "topic": "NOPE", "queueId": "0"}, nil))
	expectBusy(t, "GET_MAX_OFFSET", c.call(CodeGetMaxOffset, map[string]string{"topic": "FQ", "queueId": "0"}, nil))
	expectBusy(t, "GET_MIN_OFFSET", c.call(CodeGetMinOffset, map[string]string{"topic": "FQ", "queueId": "0"}, nil))
	expectBusy(t, "SEARCH_OFFSET_BY_TIMESTAMP",
		c.call(CodeSearchOffsetByTimestamp, map[string]string{"topic": "FQ", "queueId": "0", "timestamp": "0"}, nil))
	expectBusy(t, "QUERY_MESSAGE", c.call(CodeQueryMessage, map[string]string{"topic": "FQ", "key": "k", "maxNum": "4"}, nil))
	expectBusy(t, "VIEW_MESSAGE_BY_ID", c.call(CodeViewMessageByID, map[string]string{"offset": "0"}, nil))
}

func TestFencedCommitsNeverLowerOffsets(t *testing.T) {
	e, c := fencedEnv(t)
	update := func(off int64) {
		t.Helper()
		r := c.call(CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "G", "topic": "FQ", "queueId": "0", "commitOffset": strconv.FormatInt(off, 10)}, nil)
		if r.Code != Success {
			t.Fatalf("UPDATE_CONSUMER_OFFSET %d: %+v", off, r)
		}
	}
	stored := func() int64 {
		t.Helper()
		off, ok := e.be.ConsumerOffset("G", "FQ", 0)
		if !ok {
			t.Fatal("offset gone")
		}
		return off
	}
	update(0)
	if got := stored(); got != 7 {
		t.Fatalf("UPDATE_CONSUMER_OFFSET 0 while fenced: stored offset %d, want 7 kept", got)
	}
	update(9)
	if got := stored(); got != 9 {
		t.Fatalf("UPDATE_CONSUMER_OFFSET 9 while fenced: stored offset %d, want 9 (raising is kept)", got)
	}
	// A pull's piggy-backed commit (sysFlag FLAG_COMMIT_OFFSET) likewise.
	ext := pullExt("G", "FQ", 0, 0, 0)
	ext["sysFlag"], ext["commitOffset"] = "1", "2"
	expectBusy(t, "pull with commit", c.call(CodePullMessage, ext, nil))
	if got := stored(); got != 9 {
		t.Fatalf("piggy-backed commit 2 while fenced: stored offset %d, want 9 kept", got)
	}
	ext["commitOffset"] = "10"
	c.call(CodePullMessage, ext, nil)
	if got := stored(); got != 10 {
		t.Fatalf("piggy-backed commit 10 while fenced: stored offset %d, want 10", got)
	}

	// Once the node may answer again, a consumer may rewind on purpose.
	e.be.setAccess(ReadAccess{})
	update(3)
	if got := stored(); got != 3 {
		t.Fatalf("UPDATE_CONSUMER_OFFSET 3 on an authoritative node: stored %d, want 3", got)
	}
}

// A slave (Trailing) serves what it holds, but a pull past its end is
// "not found, wait here", never PULL_OFFSET_MOVED backwards.
func TestTrailingPullPastEndWaits(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	for i := range 5 {
		e.send(t, c, "TQ", 0, strconv.Itoa(i), "")
	}
	e.be.CreateTopic(meta.TopicConfig{TopicName: "TEMPTY", ReadQueueNums: 1, WriteQueueNums: 1, Perm: meta.PermRead | meta.PermWrite})
	e.be.mu.Lock()
	e.be.queues[qkey("TEMPTY", 0)] = nil // exists, holds nothing
	e.be.mu.Unlock()
	// TMISSING has a topic but no queue yet (nothing dispatched).
	e.be.CreateTopic(meta.TopicConfig{TopicName: "TMISSING", ReadQueueNums: 1, WriteQueueNums: 1, Perm: meta.PermRead | meta.PermWrite})
	e.be.setAccess(ReadAccess{Trailing: true})
	for _, tc := range []struct {
		topic  string
		offset int64
		code   int16
		next   int64
	}{
		{"TQ", 2, Success, 5},            // what it holds is served
		{"TQ", 5, PullNotFound, 5},       // caught up
		{"TQ", 500, PullNotFound, 500},   // beyond its max: wait, not moved to 5
		{"TEMPTY", 7, PullNotFound, 7},   // empty queue: not moved to 0
		{"TMISSING", 9, PullNotFound, 9}, // a queue it does not have yet
	} {
		ext := pullExt("G", tc.topic, 0, tc.offset, 0)
		ext["sysFlag"] = "0"
		r := c.call(CodePullMessage, ext, nil)
		if r.Code != tc.code || extInt(t, r, "nextBeginOffset") != tc.next {
			t.Fatalf("trailing %s@%d: code %d next %s (%s), want %d %d", tc.topic, tc.offset, r.Code, r.Ext("nextBeginOffset"), r.Remark, tc.code, tc.next)
		}
	}
	// A long poll past the end is held and answered with the data once
	// it arrives at that offset.
	for i := 5; i < 8; i++ {
		e.send(t, c, "TQ", 0, strconv.Itoa(i), "")
	}
	ch := c.start(&Command{Code: CodePullMessage, ExtFields: FieldsOf(pullExt("G", "TQ", 0, 8, 5000))})
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("pull past a trailing node's end answered at once: %+v", r)
	default:
	}
	e.send(t, c, "TQ", 0, "8", "")
	select {
	case r := <-ch:
		if r.Code != Success || extInt(t, r, "nextBeginOffset") != 9 {
			t.Fatalf("held pull: code %d next %s, want SUCCESS 9", r.Code, r.Ext("nextBeginOffset"))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held pull not woken by the data")
	}
}

func TestTrailingOffsetsOnlyFromWhatItHolds(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	e.send(t, c, "SQ", 0, "a", "")
	e.be.CommitConsumerOffset("G", "SQ", 0, 1)
	e.be.setAccess(ReadAccess{Trailing: true})
	r := c.call(CodeQueryConsumerOffset, map[string]string{"consumerGroup": "G", "topic": "SQ", "queueId": "0"}, nil)
	if r.Code != Success || extInt(t, r, "offset") != 1 {
		t.Fatalf("trailing node, committed group: %+v", r)
	}
	// No offset here: the master's may not have arrived yet; neither
	// "none" (QUERY_NOT_FOUND: consumeFromWhere) nor 0 would be true.
	r = c.call(CodeQueryConsumerOffset, map[string]string{"consumerGroup": "G2", "topic": "SQ", "queueId": "0"}, nil)
	if r.Code != SystemBusy {
		t.Fatalf("trailing node, group without an offset: code %d offset %q remark %q, want SYSTEM_BUSY", r.Code, r.Ext("offset"), r.Remark)
	}
	// Commits only raise.
	c.call(CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "G", "topic": "SQ", "queueId": "0", "commitOffset": "0"}, nil)
	if off, _ := e.be.ConsumerOffset("G", "SQ", 0); off != 1 {
		t.Fatalf("trailing node: commit 0 lowered the offset to %d", off)
	}
	// GET_MAX_OFFSET answers what it holds.
	if r := c.call(CodeGetMaxOffset, map[string]string{"topic": "SQ", "queueId": "0"}, nil); r.Code != Success || extInt(t, r, "offset") != 1 {
		t.Fatalf("trailing GET_MAX_OFFSET: %+v", r)
	}
}

// core.NotYetVisible (dispatcher behind, or a trailing log: the Backend
// decides, see host's GetMessages) is "wait at the requested offset".
func TestPullResponseNotYetVisible(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset int64
		res    core.GetResult
		code   int16
		next   int64
	}{
		{"not yet visible", 500, core.GetResult{Status: core.NotYetVisible, NextOffset: 500, MaxOffset: 256}, PullNotFound, 500},
		{"authoritative overflow badly", 500, core.GetResult{Status: core.OffsetOverflowBadly, NextOffset: 256, MaxOffset: 256}, PullOffsetMoved, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &Request{Cmd: &Command{Code: CodePullMessage, Opaque: 1}}
			resp, _ := pullResponse(req, &pullHeader{offset: tc.offset}, tc.res)
			if resp.Code != tc.code || extInt(t, resp, "nextBeginOffset") != tc.next {
				t.Fatalf("code %d next %s, want %d %d", resp.Code, resp.Ext("nextBeginOffset"), tc.code, tc.next)
			}
		})
	}
}

func TestViewDamagedMessageNotServed(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	e.send(t, c, "VQ", 0, "a", "")
	e.be.mu.Lock()
	e.be.readErr = fmt.Errorf("%w: read record at 0: record: corrupt: body CRC mismatch", ErrCorrupt)
	e.be.mu.Unlock()
	r := c.call(CodeViewMessageByID, map[string]string{"offset": "0"}, nil)
	if r.Code == Success || len(r.Body) > 0 {
		t.Fatalf("damaged record served: code %d, %d body bytes", r.Code, len(r.Body))
	}
	if !strings.Contains(r.Remark, "offset 0") || !strings.Contains(r.Remark, "damaged") || !strings.Contains(r.Remark, "CRC") {
		t.Fatalf("remark %q does not name the offset and the damage", r.Remark)
	}
}
