package remoting

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/core/meta"
)

var updateGolden = flag.Bool("update", false, "rewrite the admin golden response files")

// adminRequest is a recorded request in testdata/admin/*.request.json:
// the code, header fields and body a RocketMQ admin tool
// (rocketmq-client-go's admin package, Java mqadmin) sends.
type adminRequest struct {
	Code      int16             `json:"code"`
	ExtFields map[string]string `json:"extFields"`
	Body      json.RawMessage   `json:"body"`
}

func loadAdminRequest(t *testing.T, name string) adminRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "admin", name+".request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r adminRequest
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// callRecorded sends the recorded request name and checks the response
// code.
func callRecorded(t *testing.T, c *testClient, name string, wantCode int16) *Command {
	t.Helper()
	r := loadAdminRequest(t, name)
	resp := c.call(r.Code, r.ExtFields, r.Body)
	if resp.Code != wantCode {
		t.Fatalf("%s: code %d (%s), want %d", name, resp.Code, resp.Remark, wantCode)
	}
	return resp
}

// storeTimes matches the store timestamps of response bodies, which the
// golden files show as <ts>.
var storeTimes = regexp.MustCompile(`("(?:lastUpdateTimestamp|lastTimestamp)":)[1-9][0-9]{12}`)

// checkGolden compares body with testdata/admin/name.response (store
// timestamps masked), or rewrites the file with -update.
func checkGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	got := storeTimes.ReplaceAll(body, []byte("${1}<ts>"))
	path := filepath.Join("testdata", "admin", name+".response")
	if *updateGolden {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != strings.TrimRight(string(want), "\n") {
		t.Errorf("%s body:\n got %s\nwant %s", name, got, want)
	}
}

// pinVersions makes the fake's table versions deterministic for the
// golden files.
func pinVersions(be *fakeBackend) {
	be.mu.Lock()
	defer be.mu.Unlock()
	a := be.admin()
	a.topicsVer = meta.DataVersion{Timestamp: 1700000000000, Counter: 1}
	a.groupsVer = meta.DataVersion{Timestamp: 1700000000000, Counter: 2}
}

func TestAdminTopicCodesGolden(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	c := dialTest(t, e.addr)
	callRecorded(t, c, "create_topic", Success)
	got, ok := e.be.Topic("orders")
	want := meta.TopicConfig{TopicName: "orders", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, TopicFilterType: meta.FilterSingleTag}
	if !ok || got != want {
		t.Fatalf("topic after create: %+v %v, want %+v", got, ok, want)
	}
	before := time.Now().UnixMilli()
	for i := range 3 {
		if r := e.send(t, c, "orders", 0, fmt.Sprint("m", i), ""); r.Code != Success {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	if r := e.send(t, c, "orders", 5, "m", ""); r.Code != Success {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	pinVersions(e.be)
	checkGolden(t, "all_topic_config", callRecorded(t, c, "all_topic_config", Success).Body)
	checkGolden(t, "topic_list", callRecorded(t, c, "topic_list", Success).Body)

	body := callRecorded(t, c, "topic_stats", Success).Body
	checkGolden(t, "topic_stats", body)
	stats, err := DecodeTopicStats(body)
	if err != nil || len(stats) != 8 {
		t.Fatalf("DecodeTopicStats: %d queues, %v", len(stats), err)
	}
	if s := stats[0]; s.MaxOffset != 3 || s.LastUpdateTimestamp < before || s.LastUpdateTimestamp > time.Now().UnixMilli() {
		t.Errorf("queue 0 stats %+v", s)
	}
	if s := stats[1]; s.MaxOffset != 0 || s.LastUpdateTimestamp != 0 {
		t.Errorf("queue 1 stats %+v", s)
	}

	// An update changes the counts; the queues' messages stay.
	r := loadAdminRequest(t, "create_topic")
	r.ExtFields["writeQueueNums"], r.ExtFields["perm"] = "2", "4"
	if resp := c.call(r.Code, r.ExtFields, nil); resp.Code != Success {
		t.Fatalf("update: %d %s", resp.Code, resp.Remark)
	}
	if got, _ := e.be.Topic("orders"); got.WriteQueueNums != 2 || got.ReadQueueNums != 8 || got.Perm != 4 {
		t.Fatalf("topic after update: %+v", got)
	}

	e.be.CommitConsumerOffset("billing", "orders", 0, 2)
	callRecorded(t, c, "delete_topic_broker", Success)
	if _, ok := e.be.Topic("orders"); ok {
		t.Fatal("topic still there after DELETE_TOPIC_IN_BROKER")
	}
	if _, ok := e.be.ConsumerOffset("billing", "orders", 0); ok {
		t.Fatal("the topic's consumer offsets survived its deletion")
	}
	callRecorded(t, c, "delete_topic_namesrv", Success)
	if resp := c.call(CodeGetRouteInfoByTopic, map[string]string{"topic": "orders"}, nil); resp.Code != TopicNotExist {
		t.Fatalf("route after delete: code %d", resp.Code)
	}
	if resp := callRecorded(t, c, "topic_stats", TopicNotExist); !strings.Contains(resp.Remark, "orders") {
		t.Errorf("remark %q", resp.Remark)
	}
}

func TestAdminTopicRefusals(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	c := dialTest(t, e.addr)
	base := loadAdminRequest(t, "create_topic").ExtFields
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range base {
			m[kk] = vv
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		ext  map[string]string
		code int16
		want string
	}{
		{"missing topic", with("topic", ""), SystemError, "topic is missing"},
		{"missing readQueueNums", with("readQueueNums", ""), SystemError, "readQueueNums is missing"},
		{"non-numeric perm", with("perm", "rw"), SystemError, "perm"},
		{"bad name", with("topic", "a b"), InvalidParameter, "character"},
		{"system topic", with("topic", "SCHEDULE_TOPIC_XXXX"), InvalidParameter, "system topic"},
		{"TBW102", with("topic", AutoCreateTopicKey), InvalidParameter, "system topic"},
		{"zero queues", with("writeQueueNums", "0"), InvalidParameter, "writeQueueNums"},
		{"too many queues", with("readQueueNums", "5000"), InvalidParameter, "readQueueNums"},
		{"bad perm bits", with("perm", "8"), InvalidParameter, "perm"},
		{"bad filter type", with("topicFilterType", "SQL"), InvalidParameter, "topicFilterType"},
	} {
		resp := c.call(CodeUpdateAndCreateTopic, tc.ext, nil)
		if resp.Code != tc.code || !strings.Contains(resp.Remark, tc.want) {
			t.Errorf("%s: code %d remark %q, want %d containing %q", tc.name, resp.Code, resp.Remark, tc.code, tc.want)
		}
	}
	if s := e.be.TopicSnapshot(); len(s.Topics) != 0 {
		t.Fatalf("refused requests created topics: %v", s.Topics)
	}
	if resp := c.call(CodeDeleteTopicInBroker, nil, nil); resp.Code != SystemError {
		t.Errorf("delete without topic: %d", resp.Code)
	}
	if resp := c.call(CodeDeleteTopicInBroker, map[string]string{"topic": "RMQ_SYS_TRANS_HALF_TOPIC"}, nil); resp.Code != InvalidParameter {
		t.Errorf("delete of a system topic: %d", resp.Code)
	}
	e.be.setAdminRefusal(fmt.Errorf("this node is a slave: %w", ErrServiceUnavailable))
	if resp := c.call(CodeUpdateAndCreateTopic, base, nil); resp.Code != ServiceNotAvailable || !strings.Contains(resp.Remark, "slave") {
		t.Errorf("create on a node refusing changes: %d %q", resp.Code, resp.Remark)
	}
}

// regexpClientAddr masks the ephemeral client address of a connection
// list.
var regexpClientAddr = regexp.MustCompile(`"clientAddr":"[^"]*"`)

// regexpSubVersion masks a subscription's version (a timestamp).
var regexpSubVersion = regexp.MustCompile(`"subVersion":[0-9]+`)
