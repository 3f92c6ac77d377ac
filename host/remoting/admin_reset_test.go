package remoting

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// resetEnv is a broker with topic orders (2 queues): 3 messages on queue 0
// stored before mid, 3 more on queue 0 and 2 on queue 1 at or after it;
// group billing has consumed everything (offsets 6 and 2).
func resetEnv(t *testing.T) (e *brokerEnv, c *testClient, mid int64) {
	t.Helper()
	e = newBrokerEnv(t, BrokerConfig{})
	c = dialTest(t, e.addr)
	r := loadAdminRequest(t, "create_topic")
	r.ExtFields["readQueueNums"], r.ExtFields["writeQueueNums"] = "2", "2"
	if resp := c.call(r.Code, r.ExtFields, nil); resp.Code != Success {
		t.Fatalf("create topic: %d %s", resp.Code, resp.Remark)
	}
	send := func(q int) {
		if resp := e.send(t, c, "orders", q, "m", ""); resp.Code != Success {
			t.Fatalf("send: %d %s", resp.Code, resp.Remark)
		}
	}
	for range 3 {
		send(0)
	}
	time.Sleep(3 * time.Millisecond)
	mid = time.Now().UnixMilli()
	time.Sleep(2 * time.Millisecond)
	for range 3 {
		send(0)
	}
	send(1)
	send(1)
	e.be.CommitConsumerOffset("billing", "orders", 0, 6)
	e.be.CommitConsumerOffset("billing", "orders", 1, 2)
	return e, c, mid
}

// resetCall sends the recorded reset request with fields changed (an
// empty value removes the field).
func resetCall(t *testing.T, c *testClient, fields map[string]string) *Command {
	t.Helper()
	r := loadAdminRequest(t, "reset_offset")
	for k, v := range fields {
		if v == "" {
			delete(r.ExtFields, k)
		} else {
			r.ExtFields[k] = v
		}
	}
	return c.call(r.Code, r.ExtFields, nil)
}

func offsetsOf(t *testing.T, e *brokerEnv, group string) [2]int64 {
	t.Helper()
	var out [2]int64
	for q := range 2 {
		out[q], _ = e.be.ConsumerOffset(group, "orders", int32(q))
	}
	return out
}

func TestAdminResetOffsetGolden(t *testing.T) {
	e, c, mid := resetEnv(t)
	member := dialTest(t, e.addr)
	if r := member.call(CodeHeartBeat, nil, heartbeatBodyJSON("client-1", "billing", map[string]string{"orders": "*"})); r.Code != Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	for len(member.inbound) > 0 { // NOTIFY_CONSUMER_IDS_CHANGED
		<-member.inbound
	}

	resp := resetCall(t, c, map[string]string{"timestamp": strconv.FormatInt(mid, 10)})
	if resp.Code != Success {
		t.Fatalf("reset: %d %s", resp.Code, resp.Remark)
	}
	checkGolden(t, "reset_offset", resp.Body)
	if got := offsetsOf(t, e, "billing"); got != [2]int64{3, 0} {
		t.Fatalf("offsets after the reset to mid: %v, want [3 0]", got)
	}
	table, err := DecodeResetOffsetBody(resp.Body)
	if err != nil || len(table) != 2 || table[0].Offset != 3 || table[1].Offset != 0 || table[1].Queue.QueueID != 1 {
		t.Fatalf("DecodeResetOffsetBody: %+v %v", table, err)
	}

	// The live member is told, oneway, with the same table.
	var push *Command
	deadline := time.After(5 * time.Second)
	for push == nil {
		select {
		case cmd := <-member.inbound:
			if cmd.Code == CodeResetConsumerClientOffset {
				push = cmd
			}
		case <-deadline:
			t.Fatal("no RESET_CONSUMER_CLIENT_OFFSET reached the consumer")
		}
	}
	if !push.IsOneway() || string(push.Body) != string(resp.Body) {
		t.Errorf("push: oneway %v body %s, want the response body", push.IsOneway(), push.Body)
	}
	want := map[string]string{"topic": "orders", "group": "billing", "timestamp": strconv.FormatInt(mid, 10)}
	for k, v := range want {
		if got, _ := push.ExtFields.Get(k); got != v {
			t.Errorf("push header %s = %q, want %q", k, got, v)
		}
	}

	// Without isForce a reset never moves an offset forward; with it, it
	// does (timestamp -1 is the max).
	if resp := resetCall(t, c, nil); resp.Code != Success {
		t.Fatalf("reset to max: %d %s", resp.Code, resp.Remark)
	}
	if got := offsetsOf(t, e, "billing"); got != [2]int64{3, 0} {
		t.Fatalf("offsets after an unforced reset to the max: %v, want [3 0]", got)
	}
	if resp := resetCall(t, c, map[string]string{"isForce": "true"}); resp.Code != Success {
		t.Fatalf("forced reset to max: %d %s", resp.Code, resp.Remark)
	}
	if got := offsetsOf(t, e, "billing"); got != [2]int64{6, 2} {
		t.Fatalf("offsets after a forced reset to the max: %v, want [6 2]", got)
	}

	// 5.x: one queue, to an explicit offset, kept within the queue.
	resp = resetCall(t, c, map[string]string{"queueId": "0", "offset": "1"})
	if resp.Code != Success {
		t.Fatalf("reset queue 0 to 1: %d %s", resp.Code, resp.Remark)
	}
	if table, _ := DecodeResetOffsetBody(resp.Body); len(table) != 1 || table[0].Offset != 1 {
		t.Errorf("one-queue reset body %s", resp.Body)
	}
	resetCall(t, c, map[string]string{"queueId": "1", "offset": "99", "isForce": "true"})
	if got := offsetsOf(t, e, "billing"); got != [2]int64{1, 2} {
		t.Fatalf("offsets after the one-queue resets: %v, want [1 2]", got)
	}
}

func TestAdminResetOffsetRefusals(t *testing.T) {
	e, c, _ := resetEnv(t)
	for _, tc := range []struct {
		name   string
		fields map[string]string
		code   int16
		want   string
	}{
		{"missing group", map[string]string{"group": ""}, SystemError, "group is missing"},
		{"missing isForce", map[string]string{"isForce": ""}, SystemError, "isForce is missing"},
		{"isForce not a boolean", map[string]string{"isForce": "maybe"}, SystemError, "isForce"},
		{"timestamp not a number", map[string]string{"timestamp": "yesterday"}, SystemError, "timestamp"},
		{"timestamp below -1", map[string]string{"timestamp": "-5"}, SystemError, "negative"},
		{"offset without queueId", map[string]string{"offset": "1"}, SystemError, "needs a queueId"},
		{"unknown topic", map[string]string{"topic": "nope"}, TopicNotExist, "nope"},
		{"queue outside the topic", map[string]string{"queueId": "2"}, InvalidParameter, "queueId 2"},
		{"group with no offsets", map[string]string{"group": "nobody"}, SystemError, "nobody"},
	} {
		resp := resetCall(t, c, tc.fields)
		if resp.Code != tc.code || !strings.Contains(resp.Remark, tc.want) {
			t.Errorf("%s: code %d remark %q, want %d containing %q", tc.name, resp.Code, resp.Remark, tc.code, tc.want)
		}
	}
	e.be.mu.Lock()
	e.be.access = ReadAccess{Trailing: true}
	e.be.mu.Unlock()
	if resp := resetCall(t, c, map[string]string{"isForce": "true", "timestamp": "0"}); resp.Code != ServiceNotAvailable {
		t.Errorf("reset on a slave: %d %s", resp.Code, resp.Remark)
	}
	e.be.mu.Lock()
	e.be.access = ReadAccess{Refused: "fenced"}
	e.be.mu.Unlock()
	if resp := resetCall(t, c, map[string]string{"isForce": "true", "timestamp": "0"}); resp.Code != SystemBusy {
		t.Errorf("reset on a fenced master: %d %s", resp.Code, resp.Remark)
	}
	if got := offsetsOf(t, e, "billing"); got != [2]int64{6, 2} {
		t.Fatalf("refused resets changed offsets: %v", got)
	}
}

func TestAdminQueryTopicConsumeByWho(t *testing.T) {
	e, c, _ := resetEnv(t)
	e.be.CommitConsumerOffset("audit", "orders", 1, 0)
	e.be.CommitConsumerOffset("other", "elsewhere", 0, 0)
	if r := c.call(CodeHeartBeat, nil, heartbeatBodyJSON("client-1", "live", map[string]string{"orders": "*"})); r.Code != Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	checkGolden(t, "consume_by_who", callRecorded(t, c, "consume_by_who", Success).Body)
	if resp := c.call(CodeQueryTopicConsumeByWho, map[string]string{"topic": "unknown"}, nil); resp.Code != Success || string(resp.Body) != `{"groupList":[]}` {
		t.Errorf("unknown topic: %d %s", resp.Code, resp.Body)
	}
	if resp := c.call(CodeQueryTopicConsumeByWho, nil, nil); resp.Code != SystemError || !strings.Contains(resp.Remark, "topic is missing") {
		t.Errorf("without topic: %d %q", resp.Code, resp.Remark)
	}
}

func TestAdminCleanCodesRefused(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	c := dialTest(t, e.addr)
	for _, name := range []string{"clean_expired_cq", "clean_unused_topic"} {
		resp := callRecorded(t, c, name, RequestCodeNotSupported)
		if !strings.Contains(resp.Remark, "not supported by keel") {
			t.Errorf("%s remark %q", name, resp.Remark)
		}
	}
}

// FuzzDecodeResetOffsetBody: the decoder never panics, and what it
// accepts survives a round trip through EncodeResetOffsetBody.
func FuzzDecodeResetOffsetBody(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:3,{"brokerName":"b","queueId":1,"topic":"T"}:0}}`))
	f.Add([]byte(`{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":2,\"topic\":\"T\"}":7}}`))
	f.Add([]byte(`{"offsetTable":{}}`))
	f.Add([]byte(`{"offsetTable":{{"queueId":1}:x}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		table, err := DecodeResetOffsetBody(body)
		if err != nil {
			return
		}
		again, err := DecodeResetOffsetBody(EncodeResetOffsetBody(slices.Clone(table)))
		if err != nil {
			t.Fatalf("re-decoding %+v: %v", table, err)
		}
		count := func(s []QueueOffset) map[QueueOffset]int {
			m := map[QueueOffset]int{}
			for _, q := range s {
				m[q]++
			}
			return m
		}
		if !maps.Equal(count(table), count(again)) {
			t.Fatalf("round trip: %+v became %+v", table, again)
		}
	})
}
