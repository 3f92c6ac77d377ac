package remoting

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// sqlHeartbeat is rocketmq-client-go's heartbeat for a consumer with an
// SQL92 selector on topic (its subscription data as the client builds it).
func sqlHeartbeat(clientID, group, topic, expr string, subVersion int64) []byte {
	return fmt.Appendf(nil, `{"clientID":%q,"producerDataSet":[],"consumerDataSet":[{"groupName":%q,"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":%q,"subString":%q,"tagsSet":[],"codeSet":[],"subVersion":%d,"expressionType":"SQL92"}],"unitMode":false}]}`,
		clientID, group, topic, expr, subVersion)
}

// sendSQLSet sends ten messages to topic/0, body m<i>, with property a = i,
// TAGS TagA for even i and TagB for odd, and property s = "x" for i < 5.
func sendSQLSet(t *testing.T, e *brokerEnv, c *testClient, topic string) {
	t.Helper()
	for i := range 10 {
		kv := []string{"a", fmt.Sprint(i), record.PropertyTags, []string{"TagA", "TagB"}[i%2]}
		if i < 5 {
			kv = append(kv, "s", "x")
		}
		if r := e.send(t, c, topic, 0, fmt.Sprintf("m%d", i), props(kv...)); r.Code != Success {
			t.Fatalf("send m%d: %+v", i, r)
		}
	}
}

func bodies(t *testing.T, r *Command) string {
	t.Helper()
	var out []string
	for _, rec := range decodeAll(t, r.Body) {
		out = append(out, string(rec.Body))
	}
	return strings.Join(out, " ")
}

// TestPullSQL92FromHeartbeat: a push consumer's pull (no subscription
// posted) is filtered by its heartbeat's SQL92 expression; nothing
// matching skips ahead with PULL_RETRY_IMMEDIATELY; a heartbeat
// expression that does not compile is accepted but its pulls get
// FILTER_DATA_NOT_EXIST with the parse error.
func TestPullSQL92FromHeartbeat(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	sendSQLSet(t, e, c, "TS")
	for _, tc := range []struct {
		group, expr, want string
		offset, next      int64
	}{
		{"GB", "a BETWEEN 0 AND 3", "m0 m1 m2 m3", 0, 10},
		{"GS", "s = 'x' AND TAGS = 'TagB'", "m1 m3", 0, 10},
		{"GI", "TAGS IN ('TagA') AND a > 5", "m6 m8", 0, 10},
		{"GN", "s IS NULL", "m5 m6 m7 m8 m9", 0, 10},
		{"GO", "a BETWEEN 0 AND 3", "m3", 3, 10},
	} {
		if r := c.call(CodeHeartBeat, nil, sqlHeartbeat("C-"+tc.group, tc.group, "TS", tc.expr, 7)); r.Code != Success {
			t.Fatalf("heartbeat %s: %+v", tc.expr, r)
		}
		<-c.inbound // NOTIFY_CONSUMER_IDS_CHANGED
		r := c.call(CodePullMessage, pullExt(tc.group, "TS", 0, tc.offset, 0), nil)
		if r.Code != Success || bodies(t, r) != tc.want || extInt(t, r, "nextBeginOffset") != tc.next {
			t.Errorf("%s from %d: code %d %q, next %s; want %q, next %d", tc.expr, tc.offset, r.Code, bodies(t, r), r.Ext("nextBeginOffset"), tc.want, tc.next)
		}
	}
	// Nothing past offset 4 matches: skip to the end, no records.
	r := c.call(CodePullMessage, pullExt("GB", "TS", 0, 4, 0), nil)
	if r.Code != PullRetryImmediately || extInt(t, r, "nextBeginOffset") != 10 || len(r.Body) != 0 {
		t.Fatalf("no match: code %d next %s body %d bytes; want PULL_RETRY_IMMEDIATELY, next 10", r.Code, r.Ext("nextBeginOffset"), len(r.Body))
	}
	// Caught up: held, then PULL_NOT_FOUND at the same offset.
	if r := c.call(CodePullMessage, pullExt("GB", "TS", 0, 10, 50), nil); r.Code != PullNotFound || extInt(t, r, "nextBeginOffset") != 10 {
		t.Fatalf("caught up: %+v", r)
	}

	// A bad expression: the heartbeat succeeds (as in RocketMQ), pulls
	// are refused with the parse error.
	if r := c.call(CodeHeartBeat, nil, sqlHeartbeat("C-bad", "GBAD", "TS", "a BETWEEN 3 AND 0", 7)); r.Code != Success {
		t.Fatalf("heartbeat with a bad expression: %+v", r)
	}
	<-c.inbound
	r = c.call(CodePullMessage, pullExt("GBAD", "TS", 0, 0, 0), nil)
	if r.Code != FilterDataNotExist || !strings.Contains(r.Remark, "out of order") || !strings.Contains(r.Remark, "GBAD") {
		t.Fatalf("pull with a bad heartbeat expression: code %d %q, want FILTER_DATA_NOT_EXIST with the parse error", r.Code, r.Remark)
	}

	// A pull naming a newer subscription version than the heartbeat's.
	ext := pullExt("GB", "TS", 0, 0, 0)
	ext["subVersion"] = "8"
	if r := c.call(CodePullMessage, ext, nil); r.Code != FilterDataNotLatest {
		t.Fatalf("pull with a newer subVersion: %+v, want FILTER_DATA_NOT_LATEST", r)
	}
}

// TestPullSQL92Posted: a pull posting its own SQL92 subscription (sysFlag
// 4, as a pull consumer's Pull does) is filtered by it; a posted
// expression that does not compile, or an unknown expression type, gets
// SUBSCRIPTION_PARSE_FAILED; TAG subscriptions are unaffected.
func TestPullSQL92Posted(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	sendSQLSet(t, e, c, "TP")
	post := func(typ, expr string) *Command {
		ext := pullExt("GP", "TP", 0, 0, 0)
		ext["sysFlag"] = "6"
		ext["expressionType"] = typ
		ext["subscription"] = expr
		ext["subVersion"] = "99" // ignored for a posted subscription
		return c.call(CodePullMessage, ext, nil)
	}
	if r := post("SQL92", "a > 7 OR a = 0"); r.Code != Success || bodies(t, r) != "m0 m8 m9" {
		t.Fatalf("posted SQL92: code %d %q %q", r.Code, bodies(t, r), r.Remark)
	}
	if r := post("SQL92", "TAGS ="); r.Code != SubscriptionParseFailed || !strings.Contains(r.Remark, "unexpected end") {
		t.Fatalf("posted bad SQL92: code %d %q", r.Code, r.Remark)
	}
	if r := post("XPATH", "a"); r.Code != SubscriptionParseFailed || !strings.Contains(r.Remark, "XPATH") {
		t.Fatalf("posted unknown type: code %d %q", r.Code, r.Remark)
	}
	if r := post("TAG", "TagB"); r.Code != Success || bodies(t, r) != "m1 m3 m5 m7 m9" {
		t.Fatalf("posted TAG: code %d %q", r.Code, bodies(t, r))
	}
}

// TestSQLSelectorDisabled: with SQL92 filtering disabled a valid SQL92
// subscription gets SYSTEM_ERROR with RocketMQ's remark, after the
// compile check (a bad expression still gets its own code first).
func TestSQLSelectorDisabled(t *testing.T) {
	cmd := &Command{Code: CodePullMessage, Opaque: 1}
	ok := subscription{Topic: "T", SubString: "a = 1", ExpressionType: ExpressionSQL92}
	if _, r := sqlSelector(cmd, "G", ok, false, 0, false); r == nil || r.Code != SystemError ||
		r.Remark != "The broker does not support consumer to filter message by SQL92" {
		t.Fatalf("disabled: %+v", r)
	}
	bad := subscription{Topic: "T", SubString: "a =", ExpressionType: ExpressionSQL92}
	if _, r := sqlSelector(cmd, "G", bad, false, 0, false); r == nil || r.Code != FilterDataNotExist {
		t.Fatalf("disabled, bad heartbeat expression: %+v", r)
	}
	if _, r := sqlSelector(cmd, "G", bad, true, 0, false); r == nil || r.Code != SubscriptionParseFailed {
		t.Fatalf("disabled, bad posted expression: %+v", r)
	}
	if sel, r := sqlSelector(cmd, "G", ok, false, 0, true); r != nil || sel == nil {
		t.Fatalf("enabled: %v %+v", sel, r)
	}
}

// TestFilterSQLKeepsInput: filtering copies what it keeps and leaves the
// Backend's buffer alone; a result where everything matches is returned
// as it is.
func TestFilterSQLKeepsInput(t *testing.T) {
	be := newFakeBackend()
	b := NewBroker(BrokerConfig{AutoCreateTopics: true, Logger: quietLogger()}, be)
	t.Cleanup(b.Close)
	s := NewServer(ServerConfig{Logger: quietLogger()})
	b.Register(s)
	c := dialTest(t, startServer(t, s))
	e := &brokerEnv{be: be, b: b}
	sendSQLSet(t, e, c, "TK")
	res, err := be.GetMessages(t.Context(), "TK", 0, 0, 32, 1<<20, nil)
	if err != nil || res.Status != core.Found || len(res.Sizes) != 10 {
		t.Fatalf("read: %v %v", res.Status, err)
	}
	orig := bytes.Clone(res.Data)
	sel, _, err := sqlFilters.Compile("a <> 4")
	if err != nil {
		t.Fatal(err)
	}
	got := filterSQL(res, sel)
	if len(got.Sizes) != 9 || !bytes.Equal(res.Data, orig) || got.NextOffset != res.NextOffset {
		t.Fatalf("filtered: %d records, input changed %v, next %d/%d", len(got.Sizes), !bytes.Equal(res.Data, orig), got.NextOffset, res.NextOffset)
	}
	all, _, _ := sqlFilters.Compile("a IS NOT NULL")
	if got := filterSQL(res, all); &got.Data[0] != &res.Data[0] || len(got.Sizes) != 10 {
		t.Fatal("everything matched but the result was copied")
	}
}

// TestCheckClientConfig: CHECK_CLIENT_CONFIG (a Java consumer's start)
// succeeds for TAG and for SQL92 that compiles, and fails with
// SUBSCRIPTION_PARSE_FAILED and the parse error otherwise, or with
// SYSTEM_ERROR when SQL92 filtering is disabled.
func TestCheckClientConfig(t *testing.T) {
	b := NewBroker(BrokerConfig{Logger: quietLogger()}, newFakeBackend())
	t.Cleanup(b.Close)
	check := func(body string) *Command {
		return b.handleCheckClientConfig(&Request{Cmd: &Command{Code: 46, Opaque: 3, Body: []byte(body)}})
	}
	const tmpl = `{"clientId":"192.0.2.1@1","group":"GJ","subscriptionData":{"classFilterMode":false,"topic":"T","subString":%q,"expressionType":%q,"tagsSet":[],"codeSet":[],"subVersion":1}}`
	for _, tc := range []struct {
		expr, typ string
		code      int16
		remark    string
	}{
		{"*", "TAG", Success, ""},
		{"a BETWEEN 0 AND 3", "SQL92", Success, ""},
		{"a BETWEEN 3 AND 0", "SQL92", SubscriptionParseFailed, "out of order"},
		{"a", "XPATH", SubscriptionParseFailed, "XPATH"},
	} {
		r := check(fmt.Sprintf(tmpl, tc.expr, tc.typ))
		if r.Code != tc.code || !strings.Contains(r.Remark, tc.remark) || r.Opaque != 3 {
			t.Errorf("%s %q: code %d %q, want %d with %q", tc.typ, tc.expr, r.Code, r.Remark, tc.code, tc.remark)
		}
	}
	if r := check(`{"clientId":"x","group":"GJ"}`); r.Code != Success {
		t.Errorf("no subscription: %+v", r)
	}
	if r := check(`{`); r.Code != SystemError {
		t.Errorf("bad body: %+v", r)
	}
	sub := subscription{Topic: "T", SubString: "a = 1", ExpressionType: ExpressionSQL92}
	if r := checkClientSQL(&Command{}, "GJ", sub, false); r.Code != SystemError ||
		r.Remark != "The broker does not support consumer to filter message by SQL92" {
		t.Errorf("disabled: %+v", r)
	}
}

// TestCheckClientConfigServed: CHECK_CLIENT_CONFIG reaches its handler over
// the wire (a Java SQL92 consumer's start), and BrokerConfig's switch turns
// SQL92 off there as in pulls.
func TestCheckClientConfigServed(t *testing.T) {
	body := []byte(`{"clientId":"192.0.2.1@1","group":"GJ","subscriptionData":{"classFilterMode":false,"topic":"T","subString":"a > 1","expressionType":"SQL92","tagsSet":[],"codeSet":[],"subVersion":1}}`)
	for _, disabled := range []bool{false, true} {
		e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true, DisablePropertyFilter: disabled})
		c := dialTest(t, e.addr)
		r := c.call(CodeCheckClientConfig, nil, body)
		want := Success
		if disabled {
			want = SystemError
		}
		if r.Code != want {
			t.Errorf("disabled=%v: CHECK_CLIENT_CONFIG answered %d %q, want %d", disabled, r.Code, r.Remark, want)
		}
	}
}
