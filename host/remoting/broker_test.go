package remoting

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
)

type brokerEnv struct {
	be   *fakeBackend
	b    *Broker
	addr string

	mu  sync.Mutex
	now time.Time
}

func newBrokerEnv(t *testing.T, cfg BrokerConfig) *brokerEnv {
	t.Helper()
	e := &brokerEnv{be: newFakeBackend(), now: time.Unix(1_700_000_000, 0)}
	cfg.Logger = quietLogger()
	cfg.Now = func() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }
	e.b = NewBroker(cfg, e.be)
	t.Cleanup(e.b.Close)
	s := NewServer(ServerConfig{Logger: quietLogger()})
	e.b.Register(s)
	NewNameServer(NameServerConfig{AutoCreateTopics: cfg.AutoCreateTopics, Logger: quietLogger()}, fakeRoutes{e.be, BrokerIdentity{MasterAddr: "127.0.0.1:10911"}}).Register(s)
	e.addr = startServer(t, s)
	return e
}

func (e *brokerEnv) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

func props(kv ...string) string {
	var b []byte
	for i := 0; i+1 < len(kv); i += 2 {
		b = record.SetProperty(b, kv[i], kv[i+1])
	}
	return string(b)
}

func sendExt(topic string, queueID int, properties string) map[string]string {
	return map[string]string{
		"producerGroup": "PG", "topic": topic, "queueId": strconv.Itoa(queueID), "sysFlag": "0",
		"bornTimestamp": "1700000000000", "flag": "0", "properties": properties, "reconsumeTimes": "0",
		"unitMode": "false", "maxReconsumeTimes": "0", "batch": "false", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
	}
}

func (e *brokerEnv) send(t *testing.T, c *testClient, topic string, queueID int, body string, properties string) *Command {
	t.Helper()
	return c.call(CodeSendMessage, sendExt(topic, queueID, properties), []byte(body))
}

func pullExt(group, topic string, q int, offset int64, suspendMs int) map[string]string {
	return map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(q), "queueOffset": strconv.FormatInt(offset, 10),
		"maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": strconv.Itoa(suspendMs),
		"subscription": "", "subVersion": "0", "expressionType": "TAG",
	}
}

func decodeAll(t *testing.T, body []byte) []*record.Record {
	t.Helper()
	var out []*record.Record
	for len(body) > 0 {
		r, err := record.Decode(body)
		if err != nil {
			t.Fatalf("decoding pull body: %v", err)
		}
		out = append(out, r)
		body = body[r.TotalSize:]
	}
	return out
}

func extInt(t *testing.T, c *Command, k string) int64 {
	t.Helper()
	v, ok := c.ExtFields.Get(k)
	if !ok {
		t.Fatalf("response %+v lacks %s", c, k)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", k, v, err)
	}
	return n
}

func TestSendThenPull(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	p := props(record.PropertyUniqKey, "UK1", record.PropertyTags, "TagA", record.PropertyKeys, "k1")
	r := e.send(t, c, "TopicA", 1, "hello", p)
	if r.Code != Success {
		t.Fatalf("send: %+v", r)
	}
	if r.Ext("queueId") != "1" || r.Ext("queueOffset") != "0" {
		t.Fatalf("send ext %v", r.ExtFields)
	}
	local, _ := netip.ParseAddrPort(c.nc.RemoteAddr().String())
	if want := record.OffsetMsgID(local, 0); r.Ext("msgId") != want {
		t.Fatalf("msgId %q, want %q", r.Ext("msgId"), want)
	}
	r2 := e.send(t, c, "TopicA", 1, "world", p)
	if r2.Ext("queueOffset") != "1" {
		t.Fatalf("second send %v", r2.ExtFields)
	}

	pr := c.call(CodePullMessage, pullExt("G", "TopicA", 1, 0, 0), nil)
	if pr.Code != Success {
		t.Fatalf("pull %+v", pr)
	}
	if extInt(t, pr, "nextBeginOffset") != 2 || extInt(t, pr, "maxOffset") != 2 || extInt(t, pr, "minOffset") != 0 || pr.Ext("suggestWhichBrokerId") != "0" {
		t.Fatalf("pull ext %v", pr.ExtFields)
	}
	// The body is the stored bytes, unchanged.
	e.be.mu.Lock()
	stored := append([]byte(nil), e.be.log...)
	e.be.mu.Unlock()
	if string(pr.Body) != string(stored) {
		t.Fatal("pull body differs from the stored records")
	}
	recs := decodeAll(t, pr.Body)
	if len(recs) != 2 || string(recs[0].Body) != "hello" || string(recs[1].Body) != "world" {
		t.Fatalf("records %+v", recs)
	}
	r0 := recs[0]
	if r0.Topic != "TopicA" || r0.QueueID != 1 || r0.QueueOffset != 0 || recs[1].QueueOffset != 1 || string(r0.Properties) != p || r0.BornTimestamp != 1700000000000 {
		t.Fatalf("record 0 %+v", r0)
	}
	if r0.BornHost.String() != c.nc.LocalAddr().String() {
		t.Fatalf("born host %v, want %v", r0.BornHost, c.nc.LocalAddr())
	}
	// Pulling from the end without suspend answers PULL_NOT_FOUND at once.
	ext := pullExt("G", "TopicA", 1, 2, 0)
	ext["sysFlag"] = "0"
	if pr := c.call(CodePullMessage, ext, nil); pr.Code != PullNotFound || extInt(t, pr, "nextBeginOffset") != 2 {
		t.Fatalf("pull at end %+v", pr)
	}
}

func TestSendValidation(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	e.be.maxBody = 100
	c := dialTest(t, e.addr)
	cases := []struct {
		name  string
		topic string
		body  string
		props string
		code  int16
	}{
		{"bad topic", "bad topic!", "x", "", MessageIllegal},
		{"long topic", strings.Repeat("t", 128), "x", "", MessageIllegal},
		{"big body", "T", strings.Repeat("x", 101), "", MessageIllegal},
		{"bad properties", "T", "x", "a\x01b\x01c\x02", MessageIllegal},
		{"forbidden topic", "SCHEDULE_TOPIC_XXXX", "x", "", NoPermission},
		{"body at limit", "T", strings.Repeat("x", 100), "", Success},
		{"props without final separator", "T", "x", "a\x01b", Success},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.send(t, c, tc.topic, 0, tc.body, tc.props)
			if r.Code != tc.code {
				t.Fatalf("code %d (%s), want %d", r.Code, r.Remark, tc.code)
			}
			if tc.code != Success && r.Remark == "" {
				t.Fatal("error without remark")
			}
		})
	}
	r := c.call(CodeSendMessage, map[string]string{"queueId": "0"}, []byte("x"))
	if r.Code != MessageIllegal || !strings.Contains(r.Remark, "topic") {
		t.Fatalf("missing topic: %+v", r)
	}
	if r := e.send(t, c, "T", 99, "x", ""); r.Code != SystemError {
		t.Fatalf("queue out of range: %+v", r)
	}
}

func TestSendTopicNotExistWithoutAutoCreate(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	c := dialTest(t, e.addr)
	if r := e.send(t, c, "Nope", 0, "x", ""); r.Code != TopicNotExist {
		t.Fatalf("got %+v", r)
	}
	e.be.CreateTopic(meta.TopicConfig{TopicName: "Yes", ReadQueueNums: 2, WriteQueueNums: 2, Perm: meta.PermRead | meta.PermWrite})
	if r := e.send(t, c, "Yes", 1, "x", ""); r.Code != Success {
		t.Fatalf("got %+v", r)
	}
	e.be.CreateTopic(meta.TopicConfig{TopicName: "RO", ReadQueueNums: 1, WriteQueueNums: 1, Perm: meta.PermRead})
	if r := e.send(t, c, "RO", 0, "x", ""); r.Code != NoPermission {
		t.Fatalf("read-only topic: %+v", r)
	}
}

func TestSendStatusMapping(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	for _, mode := range []int{ackInline, ackCallback} {
		for _, tc := range []struct {
			ack  AckStatus
			code int16
		}{{AckOK, Success}, {AckFlushDiskTimeout, FlushDiskTimeout}, {AckFlushSlaveTimeout, FlushSlaveTimeout}, {AckSlaveNotAvailable, SlaveNotAvailable}} {
			e.be.mu.Lock()
			e.be.ackStatus, e.be.ackMode = tc.ack, mode
			e.be.mu.Unlock()
			r := e.send(t, c, "T", 0, "x", "")
			if r.Code != tc.code || r.Ext("msgId") == "" || r.Ext("queueOffset") == "" {
				t.Fatalf("ack mode %d, status %d: got %+v", mode, tc.ack, r)
			}
		}
	}
	e.be.mu.Lock()
	e.be.ackStatus, e.be.ackMode = AckOK, ackInline
	e.be.mu.Unlock()
	for _, tc := range []struct {
		err  error
		code int16
		text string
	}{
		{fmt.Errorf("appends refused above 90%% disk usage: %w: disk full", ErrServiceUnavailable), ServiceNotAvailable, "disk full"},
		{fmt.Errorf("bad: %w", record.ErrTooLarge), MessageIllegal, "too large"},
		{fmt.Errorf("bad: %w", ErrMessageIllegal), MessageIllegal, "illegal"},
		{fmt.Errorf("io error"), SystemError, "io error"},
		// core's sentinels, as the host returns them, with the remarks
		// the host's rewrapping used to give.
		{fmt.Errorf("appends refused above 90%% disk usage: %w", core.ErrDiskFull), ServiceNotAvailable, "service not available: the broker's disk is full: appends refused"},
		{fmt.Errorf("append to T: %w: %w", core.ErrMessage, record.ErrTooLarge), MessageIllegal, "message illegal: append to T"},
		{fmt.Errorf("write stall: %w", core.ErrBusy), ServiceNotAvailable, "service not available: write stall"},
		{core.ErrReadOnly, ServiceNotAvailable, "service not available: store is read-only"},
		{core.ErrClosed, ServiceNotAvailable, "service not available: store closed"},
	} {
		e.be.mu.Lock()
		e.be.appendErr = tc.err
		e.be.mu.Unlock()
		r := e.send(t, c, "T", 0, "x", "")
		if r.Code != tc.code || !strings.Contains(r.Remark, tc.text) {
			t.Fatalf("%v: got %+v", tc.err, r)
		}
	}
}

// A send waiting for its acknowledgement must not hold up the connection's
// other requests, nor later sends' appends (which keep request order).
func TestSendAckDoesNotBlockConnection(t *testing.T) {
	for _, mode := range []int{ackCallback} {
		t.Run(strconv.Itoa(mode), func(t *testing.T) { testSendAckDoesNotBlockConnection(t, mode) })
	}
}

func testSendAckDoesNotBlockConnection(t *testing.T, mode int) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	gate := make(chan struct{})
	e.be.ackGate, e.be.ackMode = gate, mode
	c := dialTest(t, e.addr)
	s1 := c.start(&Command{Code: CodeSendMessage, ExtFields: FieldsOf(sendExt("T", 0, "")), Body: []byte("1")})
	s2 := c.start(&Command{Code: CodeSendMessage, ExtFields: FieldsOf(sendExt("T", 0, "")), Body: []byte("2")})
	r := c.call(CodeGetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil)
	if r.Ext("offset") != "2" {
		t.Fatalf("max offset while acks pending: %+v", r)
	}
	select {
	case r := <-s1:
		t.Fatalf("send answered before its ack: %+v", r)
	default:
	}
	close(gate)
	for i, ch := range []<-chan *Command{s1, s2} {
		select {
		case r := <-ch:
			if r.Code != Success || r.Ext("queueOffset") != strconv.Itoa(i) {
				t.Fatalf("send %d: %+v", i, r)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("send %d unanswered", i)
		}
	}
}

func TestSendWaitFalseSkipsAck(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	e.be.ackGate = make(chan struct{}) // never opens
	c := dialTest(t, e.addr)
	r := e.send(t, c, "T", 0, "x", props(record.PropertyWaitStoreMsgOK, "false"))
	if r.Code != Success {
		t.Fatalf("got %+v", r)
	}
}

func TestSendV2AndBatch(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	v2 := map[string]string{"a": "PG", "b": "TB", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "123", "h": "7", "i": props("TAGS", "x"), "j": "0", "k": "false", "l": "16", "m": "false"}
	r := c.call(CodeSendMessageV2, v2, []byte("single"))
	if r.Code != Success || r.Ext("queueId") != "2" || r.Ext("queueOffset") != "0" {
		t.Fatalf("v2 send: %+v", r)
	}
	items := []record.ClientMessage{
		{Flag: 1, Body: []byte("b1"), Properties: []byte(props("UNIQ_KEY", "u1"))},
		{Flag: 2, Body: []byte("b2"), Properties: []byte(props("UNIQ_KEY", "u2"))},
		{Flag: 3, Body: []byte("b3")},
	}
	v2["m"] = "true"
	r = c.call(CodeSendBatchMessage, v2, record.AppendClientBatch(nil, items))
	if r.Code != Success || r.Ext("queueOffset") != "1" || len(strings.Split(r.Ext("msgId"), ",")) != 3 {
		t.Fatalf("batch send: %+v", r)
	}
	pr := c.call(CodePullMessage, pullExt("G", "TB", 2, 0, 0), nil)
	recs := decodeAll(t, pr.Body)
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	if recs[0].Flag != 7 || recs[0].BornTimestamp != 123 || string(recs[0].Body) != "single" {
		t.Fatalf("v2 record %+v", recs[0])
	}
	ids := strings.Split(r.Ext("msgId"), ",")
	for i, rec := range recs[1:] {
		if rec.Flag != items[i].Flag || string(rec.Body) != string(items[i].Body) || string(rec.Properties) != string(items[i].Properties) || rec.QueueOffset != int64(i+1) {
			t.Fatalf("batch record %d: %+v", i, rec)
		}
		if want := record.OffsetMsgID(rec.StoreHost, rec.PhysOffset); ids[i] != want {
			t.Fatalf("msgId %d = %s, want %s", i, ids[i], want)
		}
	}
	if r := c.call(CodeSendBatchMessage, v2, []byte{1, 2, 3}); r.Code != MessageIllegal {
		t.Fatalf("bad batch body: %+v", r)
	}
}

func TestLongPollWakesOnAppend(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	producer := dialTest(t, e.addr)
	e.send(t, producer, "LP", 0, "first", "")
	start := time.Now()
	ch := c.start(&Command{Code: CodePullMessage, ExtFields: FieldsOf(pullExt("G", "LP", 0, 1, 10000))})
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("pull answered before any append: %+v", r)
	default:
	}
	sent := time.Now()
	e.send(t, producer, "LP", 0, "second", "")
	select {
	case r := <-ch:
		lat := time.Since(sent)
		if r.Code != Success || extInt(t, r, "nextBeginOffset") != 2 {
			t.Fatalf("woken pull: %+v", r)
		}
		if recs := decodeAll(t, r.Body); len(recs) != 1 || string(recs[0].Body) != "second" {
			t.Fatalf("woken pull records %+v", recs)
		}
		if lat > 200*time.Millisecond {
			t.Fatalf("long poll woke %v after the append", lat)
		}
		t.Logf("woke %v after append (held %v)", lat, time.Since(start))
	case <-time.After(3 * time.Second):
		t.Fatal("long poll not woken by append")
	}
}

func TestLongPollOnNewQueueWakes(t *testing.T) {
	// A consumer of a queue that was never written long-polls too.
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	e.be.CreateTopic(meta.TopicConfig{TopicName: "NEW", ReadQueueNums: 1, WriteQueueNums: 1, Perm: meta.PermRead | meta.PermWrite})
	c := dialTest(t, e.addr)
	ch := c.start(&Command{Code: CodePullMessage, ExtFields: FieldsOf(pullExt("G", "NEW", 0, 0, 10000))})
	time.Sleep(50 * time.Millisecond)
	e.send(t, dialTest(t, e.addr), "NEW", 0, "x", "")
	select {
	case r := <-ch:
		if r.Code != Success {
			t.Fatalf("got %+v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("not woken")
	}
}

func TestLongPollTimesOut(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	e.send(t, c, "LP", 0, "x", "")
	start := time.Now()
	r := c.call(CodePullMessage, pullExt("G", "LP", 0, 1, 300), nil)
	el := time.Since(start)
	if r.Code != PullNotFound || extInt(t, r, "nextBeginOffset") != 1 || extInt(t, r, "maxOffset") != 1 {
		t.Fatalf("got %+v", r)
	}
	if el < 280*time.Millisecond || el > 2*time.Second {
		t.Fatalf("held %v, want ~300ms", el)
	}
	// MaxSuspend caps what the client asks for.
	e2 := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true, MaxSuspend: 100 * time.Millisecond})
	c2 := dialTest(t, e2.addr)
	e2.send(t, c2, "LP", 0, "x", "")
	start = time.Now()
	if r := c2.call(CodePullMessage, pullExt("G", "LP", 0, 1, 20000), nil); r.Code != PullNotFound {
		t.Fatalf("got %+v", r)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("held %v despite MaxSuspend 100ms", el)
	}
}

func TestPullResponseTable(t *testing.T) {
	cases := []struct {
		name     string
		offset   int64
		res      core.GetResult
		code     int16
		next     int64
		caughtUp bool
	}{
		{"empty queue at 0", 0, core.GetResult{Status: core.NoMessageInQueue}, PullNotFound, 0, true},
		{"empty queue at 5", 5, core.GetResult{Status: core.NoMessageInQueue}, PullOffsetMoved, 0, false},
		{"no queue at 0", 0, core.GetResult{Status: core.NoMatchedLogicQueue}, PullNotFound, 0, true},
		{"no queue at 3", 3, core.GetResult{Status: core.NoMatchedLogicQueue}, PullOffsetMoved, 0, false},
		{"drained queue at max", 10, core.GetResult{Status: core.NoMessageInQueue, NextOffset: 10, MinOffset: 10, MaxOffset: 10}, PullNotFound, 10, true},
		{"drained queue below max", 4, core.GetResult{Status: core.NoMessageInQueue, NextOffset: 10, MinOffset: 10, MaxOffset: 10}, PullOffsetMoved, 10, false},
		{"too small", 2, core.GetResult{Status: core.OffsetTooSmall, NextOffset: 5, MinOffset: 5, MaxOffset: 9}, PullOffsetMoved, 5, false},
		{"overflow one", 9, core.GetResult{Status: core.OffsetOverflowOne, NextOffset: 9, MinOffset: 0, MaxOffset: 9}, PullNotFound, 9, true},
		{"overflow badly, min 0", 50, core.GetResult{Status: core.OffsetOverflowBadly, NextOffset: 9, MinOffset: 0, MaxOffset: 9}, PullOffsetMoved, 9, false},
		{"overflow badly, backend said 0", 50, core.GetResult{Status: core.OffsetOverflowBadly, NextOffset: 0, MinOffset: 0, MaxOffset: 9}, PullOffsetMoved, 9, false},
		{"no matched message", 3, core.GetResult{Status: core.NoMatchedMessage, NextOffset: 9, MaxOffset: 9}, PullRetryImmediately, 9, false},
		{"was removing", 3, core.GetResult{Status: core.MessageWasRemoving, NextOffset: 6, MaxOffset: 9}, PullRetryImmediately, 6, false},
		{"found", 3, core.GetResult{Status: core.Found, NextOffset: 5, MaxOffset: 9, Data: []byte("xx"), Sizes: []int32{1, 1}}, Success, 5, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &Request{Cmd: &Command{Code: CodePullMessage, Opaque: 1}}
			h := &pullHeader{offset: tc.offset}
			resp, cu := pullResponse(req, h, tc.res)
			if resp.Code != tc.code || extInt(t, resp, "nextBeginOffset") != tc.next || cu != tc.caughtUp {
				t.Fatalf("code %d next %s caughtUp %v; want %d %d %v", resp.Code, resp.Ext("nextBeginOffset"), cu, tc.code, tc.next, tc.caughtUp)
			}
			for _, k := range []string{"minOffset", "maxOffset", "suggestWhichBrokerId"} {
				if _, ok := resp.ExtFields.Get(k); !ok {
					t.Fatalf("missing %s", k)
				}
			}
			if (tc.code == Success) != (len(resp.Body) > 0) {
				t.Fatalf("body %q for code %d", resp.Body, resp.Code)
			}
		})
	}
}

// The same table end to end through the fake store.
func TestPullOffsetCorrection(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	for i := range 5 {
		e.send(t, c, "OC", 0, strconv.Itoa(i), "")
	}
	e.be.mu.Lock()
	e.be.minOff[qkey("OC", 0)] = 2 // retention removed 0 and 1
	e.be.mu.Unlock()
	e.be.CreateTopic(meta.TopicConfig{TopicName: "EMPTY", ReadQueueNums: 1, WriteQueueNums: 1, Perm: meta.PermRead | meta.PermWrite})
	for _, tc := range []struct {
		topic  string
		offset int64
		code   int16
		next   int64
	}{
		{"OC", 0, PullOffsetMoved, 2},   // too small → min
		{"OC", 3, Success, 5},           // in range
		{"OC", 5, PullNotFound, 5},      // caught up
		{"OC", 900, PullOffsetMoved, 5}, // beyond max → max, not 0
		{"EMPTY", 0, PullNotFound, 0},
		{"EMPTY", 7, PullOffsetMoved, 0}, // the queue is empty: 0 is right
	} {
		ext := pullExt("G", tc.topic, 0, tc.offset, 0)
		ext["sysFlag"] = "0"
		r := c.call(CodePullMessage, ext, nil)
		if r.Code != tc.code || extInt(t, r, "nextBeginOffset") != tc.next {
			t.Fatalf("%s@%d: code %d next %s, want %d %d", tc.topic, tc.offset, r.Code, r.Ext("nextBeginOffset"), tc.code, tc.next)
		}
	}
	if r := c.call(CodePullMessage, pullExt("G", "NOPE", 0, 0, 0), nil); r.Code != TopicNotExist {
		t.Fatalf("unknown topic: %+v", r)
	}
}

func heartbeatBodyJSON(clientID, group string, subs map[string]string) []byte {
	var sd []string
	for topic, expr := range subs {
		sd = append(sd, fmt.Sprintf(`{"classFilterMode":false,"topic":%q,"subString":%q,"tagsSet":[],"codeSet":[],"subVersion":1795977800496591083,"expressionType":"TAG"}`, topic, expr))
	}
	return fmt.Appendf(nil, `{"clientID":%q,"producerDataSet":[],"consumerDataSet":[{"groupName":%q,"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[%s],"unitMode":false}]}`,
		clientID, group, strings.Join(sd, ","))
}

func consumerList(t *testing.T, c *testClient, group string) []string {
	t.Helper()
	r := c.call(CodeGetConsumerListByGroup, map[string]string{"consumerGroup": group}, nil)
	var body struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}
	if len(r.Body) > 0 {
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("consumer list body %q: %v", r.Body, err)
		}
	}
	return body.ConsumerIDList
}

func expectNotify(t *testing.T, c *testClient, group string) {
	t.Helper()
	select {
	case n := <-c.inbound:
		if n.Code != CodeNotifyConsumerIDsChanged || n.Ext("consumerGroup") != group || n.IsResponse() {
			t.Fatalf("unexpected server request %+v", n)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("no NOTIFY_CONSUMER_IDS_CHANGED for %s", group)
	}
}

func TestHeartbeatRegistry(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	a := dialTest(t, e.addr)
	b := dialTest(t, e.addr)
	// The real client's heartbeat body (remoting reference §2.3).
	real := `{"clientID":"192.0.2.2@s1","producerDataSet":[],"consumerDataSet":[{"groupName":"GS","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"%RETRY%GS","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1795977800496591083,"expressionType":"TAG"},{"classFilterMode":false,"topic":"TopicS_77800","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1795977800496479740,"expressionType":"TAG"}],"unitMode":false}]}`
	if r := a.call(CodeHeartBeat, nil, []byte(real)); r.Code != Success {
		t.Fatalf("heartbeat: %+v", r)
	}
	expectNotify(t, a, "GS")
	if _, ok := e.be.Topic("%RETRY%GS"); !ok {
		t.Fatal("retry topic not created on heartbeat")
	}
	if s, ok := e.b.reg.subscription("GS", "TopicS_77800", nil); !ok || s.SubVersion != 1795977800496479740 {
		t.Fatalf("subscription %+v %v", s, ok)
	}
	if got := consumerList(t, a, "GS"); len(got) != 1 || got[0] != "192.0.2.2@s1" {
		t.Fatalf("list %v", got)
	}
	// A second member joins: both are told.
	b.call(CodeHeartBeat, nil, heartbeatBodyJSON("192.0.2.3@s2", "GS", map[string]string{"TopicS_77800": "*"}))
	expectNotify(t, a, "GS")
	expectNotify(t, b, "GS")
	if got := consumerList(t, a, "GS"); strings.Join(got, " ") != "192.0.2.2@s1 192.0.2.3@s2" {
		t.Fatalf("list %v", got)
	}
	// A repeated heartbeat changes nothing and notifies nobody.
	e.advance(60 * time.Second)
	a.call(CodeHeartBeat, nil, []byte(real))
	select {
	case n := <-a.inbound:
		t.Fatalf("notify on unchanged membership: %+v", n)
	case <-time.After(50 * time.Millisecond):
	}
	// b's connection closes: it leaves, a is told.
	b.nc.Close()
	expectNotify(t, a, "GS")
	if got := consumerList(t, a, "GS"); len(got) != 1 || got[0] != "192.0.2.2@s1" {
		t.Fatalf("after close: %v", got)
	}
	// Expiry: a's last heartbeat was at +60 s; at +179 s it is still there,
	// at +181 s it is gone.
	e.advance(119 * time.Second)
	e.b.sweep()
	if got := consumerList(t, a, "GS"); len(got) != 1 {
		t.Fatalf("expired too early: %v", got)
	}
	e.advance(2 * time.Second)
	e.b.sweep()
	if r := a.call(CodeGetConsumerListByGroup, map[string]string{"consumerGroup": "GS"}, nil); r.Code != SystemError {
		t.Fatalf("list after expiry: %+v %s", r, r.Body)
	}
}

func TestUnregisterClient(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	a := dialTest(t, e.addr)
	b := dialTest(t, e.addr)
	a.call(CodeHeartBeat, nil, heartbeatBodyJSON("A", "G", map[string]string{"T": "*"}))
	b.call(CodeHeartBeat, nil, heartbeatBodyJSON("B", "G", map[string]string{"T": "*"}))
	expectNotify(t, a, "G")
	expectNotify(t, a, "G")
	expectNotify(t, b, "G")
	if r := b.call(CodeUnregisterClient, map[string]string{"clientID": "B", "consumerGroup": "G"}, nil); r.Code != Success {
		t.Fatalf("unregister: %+v", r)
	}
	expectNotify(t, a, "G")
	if got := consumerList(t, a, "G"); len(got) != 1 || got[0] != "A" {
		t.Fatalf("list %v", got)
	}
}

func TestPullTagFilterFromHeartbeat(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	c.call(CodeHeartBeat, nil, heartbeatBodyJSON("C1", "G", map[string]string{"TF": "TagA || TagC"}))
	for _, tag := range []string{"TagA", "TagB", "TagC", "", "TagB"} {
		p := ""
		if tag != "" {
			p = props(record.PropertyTags, tag)
		}
		e.send(t, c, "TF", 0, "body-"+tag, p)
	}
	r := c.call(CodePullMessage, pullExt("G", "TF", 0, 0, 0), nil)
	recs := decodeAll(t, r.Body)
	if len(recs) != 2 || string(recs[0].Body) != "body-TagA" || string(recs[1].Body) != "body-TagC" || extInt(t, r, "nextBeginOffset") != 5 {
		t.Fatalf("filtered pull: code %d next %s, %d records", r.Code, r.Ext("nextBeginOffset"), len(recs))
	}
	// Nothing matches past offset 3: retry immediately, skipping ahead.
	if r := c.call(CodePullMessage, pullExt("G", "TF", 0, 3, 0), nil); r.Code != PullRetryImmediately || extInt(t, r, "nextBeginOffset") != 5 {
		t.Fatalf("no match: %+v", r)
	}
	// Another group without a heartbeat gets everything.
	if r := c.call(CodePullMessage, pullExt("G2", "TF", 0, 0, 0), nil); len(decodeAll(t, r.Body)) != 5 {
		t.Fatal("unfiltered pull")
	}
	// A pull carrying its own subscription (sysFlag 4) uses it.
	ext := pullExt("G", "TF", 0, 0, 0)
	ext["sysFlag"] = "6"
	ext["subscription"] = "TagB"
	if r := c.call(CodePullMessage, ext, nil); len(decodeAll(t, r.Body)) != 2 {
		t.Fatal("subscription in pull ignored")
	}
	ext["expressionType"] = "SQL92"
	ext["subscription"] = "a >"
	if r := c.call(CodePullMessage, ext, nil); r.Code != SubscriptionParseFailed {
		t.Fatalf("SQL92 that does not compile: %+v", r)
	}
}

func TestConsumerOffsets(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	for range 3 {
		e.send(t, c, "O", 0, "x", "")
	}
	q := map[string]string{"consumerGroup": "G", "topic": "O", "queueId": "0"}
	// Fresh group, queue still starting at 0: answer 0.
	if r := c.call(CodeQueryConsumerOffset, q, nil); r.Code != Success || r.Ext("offset") != "0" {
		t.Fatalf("fresh: %+v", r)
	}
	upd := map[string]string{"consumerGroup": "G", "topic": "O", "queueId": "0", "commitOffset": "2"}
	if r := c.call(CodeUpdateConsumerOffset, upd, nil); r.Code != Success {
		t.Fatalf("update: %+v", r)
	}
	upd["commitOffset"] = "-1" // ignored
	c.call(CodeUpdateConsumerOffset, upd, nil)
	if r := c.call(CodeQueryConsumerOffset, q, nil); r.Ext("offset") != "2" {
		t.Fatalf("committed: %+v", r)
	}
	// A fresh group on a queue whose head was deleted: QUERY_NOT_FOUND.
	e.be.mu.Lock()
	e.be.minOff[qkey("O", 0)] = 1
	e.be.mu.Unlock()
	q["consumerGroup"] = "NEW"
	if r := c.call(CodeQueryConsumerOffset, q, nil); r.Code != QueryNotFound {
		t.Fatalf("fresh group, trimmed queue: %+v", r)
	}
	if r := c.call(CodeGetMaxOffset, map[string]string{"topic": "O", "queueId": "0"}, nil); r.Ext("offset") != "3" {
		t.Fatalf("max: %+v", r)
	}
	if r := c.call(CodeGetMinOffset, map[string]string{"topic": "O", "queueId": "0"}, nil); r.Ext("offset") != "1" {
		t.Fatalf("min: %+v", r)
	}
	if r := c.call(CodeGetMaxOffset, map[string]string{"topic": "NONE", "queueId": "0"}, nil); r.Code != Success || r.Ext("offset") != "0" {
		t.Fatalf("max of missing queue: %+v", r)
	}
	if r := c.call(CodeSearchOffsetByTimestamp, map[string]string{"topic": "O", "queueId": "0", "timestamp": "0"}, nil); r.Ext("offset") != "1" {
		t.Fatalf("search ts 0: %+v", r)
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if r := c.call(CodeSearchOffsetByTimestamp, map[string]string{"topic": "O", "queueId": "0", "timestamp": future}, nil); r.Ext("offset") != "3" {
		t.Fatalf("search future: %+v", r)
	}
	// A pull with sysFlag 1 commits its commitOffset.
	ext := pullExt("P", "O", 0, 1, 0)
	ext["sysFlag"] = "1"
	ext["commitOffset"] = "1"
	c.call(CodePullMessage, ext, nil)
	if off, ok := e.be.ConsumerOffset("P", "O", 0); !ok || off != 1 {
		t.Fatalf("piggy-backed commit: %d %v", off, ok)
	}
}

// pullOne pulls topic/0 from offset and returns the decoded records.
func pullAll(t *testing.T, c *testClient, topic string) []*record.Record {
	t.Helper()
	r := c.call(CodePullMessage, pullExt("G", topic, 0, 0, 0), nil)
	if r.Code != Success {
		t.Fatalf("pull %s: %+v", topic, r)
	}
	return decodeAll(t, r.Body)
}

func TestSendBackRetryThenDLQ(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	p := props(record.PropertyUniqKey, "U1", record.PropertyTags, "T1")
	e.send(t, c, "ORIG", 0, "payload", p)
	orig := pullAll(t, c, "ORIG")[0]
	sendBack := func(rec *record.Record, maxTimes string) *Command {
		return c.call(CodeConsumerSendMsgBack, map[string]string{
			"group": "G", "offset": strconv.FormatInt(rec.PhysOffset, 10), "delayLevel": "0",
			"originMsgId": "U1", "originTopic": "ORIG", "unitMode": "false", "maxReconsumeTimes": maxTimes,
		}, nil)
	}
	// Two rounds through %RETRY%G.
	rec := orig
	for round := 1; round <= 2; round++ {
		if r := sendBack(rec, "2"); r.Code != Success {
			t.Fatalf("send back %d: %+v", round, r)
		}
		retry := pullAll(t, c, "%RETRY%G")
		if len(retry) != round {
			t.Fatalf("round %d: %d retry records", round, len(retry))
		}
		rec = retry[round-1]
		if rec.ReconsumeTimes != int32(round) || string(rec.Body) != "payload" || rec.QueueID != 0 {
			t.Fatalf("retry record %+v", rec)
		}
		if v, _ := record.GetProperty(rec.Properties, record.PropertyRetryTopic); v != "ORIG" {
			t.Fatalf("RETRY_TOPIC = %q", v)
		}
		if v, _ := record.GetProperty(rec.Properties, record.PropertyOriginMsgID); v != "U1" {
			t.Fatalf("ORIGIN_MESSAGE_ID = %q", v)
		}
		if v, _ := record.GetProperty(rec.Properties, record.PropertyUniqKey); v != "U1" {
			t.Fatalf("UNIQ_KEY lost: %q", v)
		}
		if rec.BornTimestamp != orig.BornTimestamp {
			t.Fatal("born timestamp changed")
		}
	}
	// reconsumeTimes 2 >= max 2: dead letter.
	if r := sendBack(rec, "2"); r.Code != Success {
		t.Fatalf("send back to DLQ: %+v", r)
	}
	dlq := pullAll(t, c, "%DLQ%G")
	if len(dlq) != 1 || dlq[0].ReconsumeTimes != 3 || string(dlq[0].Body) != "payload" {
		t.Fatalf("dlq %+v", dlq)
	}
	if v, _ := record.GetProperty(dlq[0].Properties, record.PropertyRetryTopic); v != "ORIG" {
		t.Fatalf("DLQ RETRY_TOPIC = %q", v)
	}
	// Without a header max, the group's setting applies; delayLevel -1
	// goes straight to the DLQ.
	e.be.mu.Lock()
	e.be.maxRec["G"] = 0
	e.be.mu.Unlock()
	if r := sendBack(orig, ""); r.Code != Success {
		t.Fatalf("%+v", r)
	}
	if n := len(pullAll(t, c, "%DLQ%G")); n != 2 {
		t.Fatalf("group max 0: %d DLQ records", n)
	}
	r := c.call(CodeConsumerSendMsgBack, map[string]string{"group": "H", "offset": strconv.FormatInt(orig.PhysOffset, 10), "delayLevel": "-1"}, nil)
	if r.Code != Success {
		t.Fatalf("%+v", r)
	}
	if n := len(pullAll(t, c, "%DLQ%H")); n != 1 {
		t.Fatalf("delayLevel -1: %d DLQ records", n)
	}
	if r := c.call(CodeConsumerSendMsgBack, map[string]string{"group": "G", "offset": "999999"}, nil); r.Code != SystemError {
		t.Fatalf("bad offset: %+v", r)
	}
}

// The Go client's fallback when CONSUMER_SEND_MSG_BACK fails: a plain send
// to %RETRY%group with reconsumeTimes; past the max it lands in the DLQ.
func TestSendToRetryTopicPastMaxGoesToDLQ(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	c := dialTest(t, e.addr)
	ext := sendExt("%RETRY%G", 0, props(record.PropertyRetryTopic, "ORIG"))
	ext["reconsumeTimes"] = "1"
	ext["maxReconsumeTimes"] = "3"
	if r := c.call(CodeSendMessage, ext, []byte("r1")); r.Code != Success {
		t.Fatalf("retry send: %+v", r)
	}
	ext["reconsumeTimes"] = "3"
	if r := c.call(CodeSendMessage, ext, []byte("r3")); r.Code != Success {
		t.Fatalf("retry send past max: %+v", r)
	}
	if recs := pullAll(t, c, "%RETRY%G"); len(recs) != 1 || recs[0].ReconsumeTimes != 1 {
		t.Fatalf("retry topic %+v", recs)
	}
	if recs := pullAll(t, c, "%DLQ%G"); len(recs) != 1 || string(recs[0].Body) != "r3" || recs[0].ReconsumeTimes != 3 {
		t.Fatalf("dlq %+v", recs)
	}
}

func TestViewAndQueryMessage(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	e.send(t, c, "V", 0, "a", props(record.PropertyKeys, "k1"))
	e.send(t, c, "V", 0, "b", props(record.PropertyKeys, "k2"))
	recs := pullAll(t, c, "V")
	r := c.call(CodeViewMessageByID, map[string]string{"offset": strconv.FormatInt(recs[1].PhysOffset, 10)}, nil)
	if r.Code != Success || len(decodeAll(t, r.Body)) != 1 || string(decodeAll(t, r.Body)[0].Body) != "b" {
		t.Fatalf("view: %+v", r)
	}
	if r := c.call(CodeViewMessageByID, map[string]string{"offset": "12345"}, nil); r.Code != SystemError {
		t.Fatalf("view missing: %+v", r)
	}
	qm := map[string]string{"topic": "V", "key": "k2", "maxNum": "10", "beginTimestamp": "0", "endTimestamp": strconv.FormatInt(1<<62, 10)}
	if r := c.call(CodeQueryMessage, qm, nil); r.Code != Success || string(decodeAll(t, r.Body)[0].Body) != "b" {
		t.Fatalf("query: %+v", r)
	}
	qm["key"] = "none"
	if r := c.call(CodeQueryMessage, qm, nil); r.Code != QueryNotFound {
		t.Fatalf("query none: %+v", r)
	}
	e.be.mu.Lock()
	e.be.indexOff = true
	e.be.mu.Unlock()
	if r := c.call(CodeQueryMessage, qm, nil); r.Code != RequestCodeNotSupported || !strings.Contains(r.Remark, "index") {
		t.Fatalf("query without index: %+v", r)
	}
}

func TestLockBatchMQ(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	c := dialTest(t, e.addr)
	body := func(client string, qs ...int) []byte {
		var mqs []string
		for _, q := range qs {
			mqs = append(mqs, fmt.Sprintf(`{"topic":"T","brokerName":"broker-a","queueId":%d}`, q))
		}
		return fmt.Appendf(nil, `{"consumerGroup":"G","clientId":%q,"mqSet":[%s]}`, client, strings.Join(mqs, ","))
	}
	locked := func(r *Command) []int32 {
		var out struct {
			LockOKMQSet []messageQueue `json:"lockOKMQSet"`
		}
		if err := json.Unmarshal(r.Body, &out); r.Code != Success || err != nil {
			t.Fatalf("lock response %+v: %v", r, err)
		}
		var qs []int32
		for _, mq := range out.LockOKMQSet {
			qs = append(qs, mq.QueueID)
		}
		return qs
	}
	if got := locked(c.call(CodeLockBatchMQ, nil, body("A", 0, 1))); fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("A locks %v", got)
	}
	if got := locked(c.call(CodeLockBatchMQ, nil, body("B", 1, 2))); fmt.Sprint(got) != "[2]" {
		t.Fatalf("B locks %v", got)
	}
	if got := locked(c.call(CodeLockBatchMQ, nil, body("A", 0, 1))); fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("A renews %v", got)
	}
	c.call(CodeUnlockBatchMQ, nil, body("A", 1))
	if got := locked(c.call(CodeLockBatchMQ, nil, body("B", 1))); fmt.Sprint(got) != "[1]" {
		t.Fatalf("B after unlock %v", got)
	}
	e.advance(DefaultLockExpiry + time.Second)
	if got := locked(c.call(CodeLockBatchMQ, nil, body("B", 0))); fmt.Sprint(got) != "[0]" {
		t.Fatalf("B after expiry %v", got)
	}
}
