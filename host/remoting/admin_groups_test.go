package remoting

import (
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/core/meta"
)

func TestAdminGroupCodesGolden(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	c := dialTest(t, e.addr)
	callRecorded(t, c, "create_topic", Success)
	callRecorded(t, c, "create_group", Success)
	g := e.be.SubscriptionGroupSnapshot().Groups["billing"]
	want := meta.DefaultSubscriptionGroup("billing")
	want.ConsumeFromMinEnable, want.RetryMaxTimes = true, 5
	if g != want {
		t.Fatalf("group after create: %+v, want %+v", g, want)
	}
	before := time.Now().UnixMilli()
	for range 5 {
		if r := e.send(t, c, "orders", 0, "m", ""); r.Code != Success {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	e.be.CommitConsumerOffset("billing", "orders", 0, 2)
	e.be.CommitConsumerOffset("billing", "%RETRY%billing", 0, 0)
	e.be.CommitConsumerOffset("audit", "orders", 3, 0)
	pinVersions(e.be)
	checkGolden(t, "all_groups", callRecorded(t, c, "all_groups", Success).Body)
	checkGolden(t, "all_consumer_offsets", callRecorded(t, c, "all_consumer_offsets", Success).Body)

	body := callRecorded(t, c, "consume_stats", Success).Body
	checkGolden(t, "consume_stats", body)
	stats, err := DecodeConsumeStats(body)
	if err != nil || len(stats) != 8 {
		t.Fatalf("DecodeConsumeStats: %d queues, %v", len(stats), err)
	}
	if s := stats[0]; s.BrokerOffset != 5 || s.ConsumerOffset != 2 || s.Lag() != 3 || s.LastTimestamp < before {
		t.Errorf("queue 0: %+v lag %d", s, s.Lag())
	}
	// Without a topic: the group's offset topics that exist (its retry
	// topic has no config in the fake, so it is left out).
	checkGolden(t, "consume_stats_all_topics", callRecorded(t, c, "consume_stats_all_topics", Success).Body)

	callRecorded(t, c, "consumer_connections", ConsumerNotOnline)
	if r := c.call(CodeHeartBeat, nil, heartbeatBodyJSON("client-1", "billing", map[string]string{"orders": "*"})); r.Code != Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	cc := callRecorded(t, c, "consumer_connections", Success).Body
	got := regexpClientAddr.ReplaceAllString(string(cc), `"clientAddr":"<addr>"`)
	got = regexpSubVersion.ReplaceAllString(got, `"subVersion":<v>`)
	checkGolden(t, "consumer_connections", []byte(got))

	callRecorded(t, c, "delete_group", Success)
	if _, ok := e.be.SubscriptionGroupSnapshot().Groups["billing"]; ok {
		t.Fatal("group still there after DELETE_SUBSCRIPTIONGROUP")
	}
	if _, ok := e.be.ConsumerOffset("billing", "orders", 0); ok {
		t.Fatal("cleanOffset=true left the group's offsets")
	}
	if _, ok := e.be.ConsumerOffset("audit", "orders", 3); !ok {
		t.Fatal("deleting billing removed audit's offsets")
	}
}

func TestAdminGroupRefusals(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	c := dialTest(t, e.addr)
	for _, tc := range []struct {
		name string
		code int16
		ext  map[string]string
		body string
		resp int16
		want string
	}{
		{"body not JSON", CodeUpdateAndCreateSubscriptionGroup, nil, "{groupName:", SystemError, "decoding"},
		{"empty group name", CodeUpdateAndCreateSubscriptionGroup, nil, `{"groupName":""}`, InvalidParameter, "empty group name"},
		{"negative retries", CodeUpdateAndCreateSubscriptionGroup, nil, `{"groupName":"g","retryMaxTimes":-1}`, InvalidParameter, "retryMaxTimes"},
		{"delete without name", CodeDeleteSubscriptionGroup, nil, "", SystemError, "groupName is missing"},
		{"delete bad name", CodeDeleteSubscriptionGroup, map[string]string{"groupName": "a/b"}, "", InvalidParameter, "character"},
		{"stats without group", CodeGetConsumeStats, nil, "", SystemError, "consumerGroup is missing"},
		{"stats of unknown topic", CodeGetConsumeStats, map[string]string{"consumerGroup": "g", "topic": "nope"}, "", TopicNotExist, "nope"},
		{"connections without group", CodeGetConsumerConnectionList, nil, "", SystemError, "consumerGroup is missing"},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		resp := c.call(tc.code, tc.ext, body)
		if resp.Code != tc.resp || !strings.Contains(resp.Remark, tc.want) {
			t.Errorf("%s: code %d remark %q, want %d containing %q", tc.name, resp.Code, resp.Remark, tc.resp, tc.want)
		}
	}
	if s := e.be.SubscriptionGroupSnapshot(); len(s.Groups) != 0 {
		t.Fatalf("refused requests created groups: %v", s.Groups)
	}
}

func TestAdminRuntimeInfo(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	e.be.mu.Lock()
	e.be.admin().runtimeInfo = map[string]string{"commitLogMaxOffset": "42", "bootTimestamp": "1700000000000"}
	e.be.mu.Unlock()
	c := dialTest(t, e.addr)
	checkGolden(t, "runtime_info", callRecorded(t, c, "runtime_info", Success).Body)
}
