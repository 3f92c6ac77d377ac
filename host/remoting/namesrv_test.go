package remoting

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/meta"
)

func newNameEnv(t *testing.T, cfg NameServerConfig, id BrokerIdentity) (*fakeBackend, *testClient) {
	t.Helper()
	be := newFakeBackend()
	cfg.Logger = quietLogger()
	s := NewServer(ServerConfig{Logger: quietLogger()})
	NewNameServer(cfg, fakeRoutes{be, id}).Register(s)
	return be, dialTest(t, startServer(t, s))
}

func TestRouteGolden(t *testing.T) {
	_, c := newNameEnv(t, NameServerConfig{AutoCreateTopics: true}, BrokerIdentity{MasterAddr: "127.0.0.1:10911"})
	r := c.call(CodeGetRouteInfoByTopic, map[string]string{"topic": "TopicS_77783"}, nil)
	want := `{"orderTopicConf":"","queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],` +
		`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:10911"}}],"filterServerTable":{}}`
	if r.Code != Success || string(r.Body) != want {
		t.Fatalf("route\n got %d %s\nwant %s", r.Code, r.Body, want)
	}
}

// clientBrokerAddrs parses brokerAddrs the way rocketmq-client-go does
// (route.go): take the raw object text, strip the first and last character,
// split on ",", split each entry at the first ":".
func clientBrokerAddrs(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var raw struct {
		BrokerDatas []struct {
			BrokerAddrs json.RawMessage `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(body, &raw); err != nil || len(raw.BrokerDatas) != 1 {
		t.Fatalf("route body %s: %v", body, err)
	}
	s := string(raw.BrokerDatas[0].BrokerAddrs)
	out := map[string]string{}
	for _, kv := range strings.Split(s[1:len(s)-1], ",") {
		k, v, _ := strings.Cut(kv, ":")
		out[strings.Trim(k, `"`)] = strings.Trim(v, `"`)
	}
	return out
}

func TestRouteSlaveAndNames(t *testing.T) {
	_, c := newNameEnv(t, NameServerConfig{AutoCreateTopics: true, DefaultQueueNums: 8},
		BrokerIdentity{Cluster: "C1", Name: "b1", MasterAddr: "10.0.0.1:10911", SlaveAddr: "10.0.0.2:10911"})
	r := c.call(CodeGetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	addrs := clientBrokerAddrs(t, r.Body)
	if addrs["0"] != "10.0.0.1:10911" || addrs["1"] != "10.0.0.2:10911" || len(addrs) != 2 {
		t.Fatalf("addrs %v from %s", addrs, r.Body)
	}
	var route topicRouteData
	if err := json.Unmarshal(r.Body, &route); err != nil {
		t.Fatal(err)
	}
	q := route.QueueDatas[0]
	if q.BrokerName != "b1" || q.ReadQueueNums != 8 || q.WriteQueueNums != 8 || q.Perm != 6 || route.BrokerDatas[0].Cluster != "C1" {
		t.Fatalf("route %+v", route)
	}
	ci := c.call(CodeGetBrokerClusterInfo, nil, nil)
	want := `{"brokerAddrTable":{"b1":{"cluster":"C1","brokerName":"b1","brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}}},"clusterAddrTable":{"C1":["b1"]}}`
	if ci.Code != Success || string(ci.Body) != want {
		t.Fatalf("cluster info\n got %s\nwant %s", ci.Body, want)
	}
}

func TestRouteAutoCreate(t *testing.T) {
	be, c := newNameEnv(t, NameServerConfig{}, BrokerIdentity{MasterAddr: "127.0.0.1:1"})
	// Without auto-create an unknown topic has no route...
	if r := c.call(CodeGetRouteInfoByTopic, map[string]string{"topic": "T"}, nil); r.Code != TopicNotExist || r.Remark == "" {
		t.Fatalf("got %+v", r)
	}
	if _, ok := be.Topic("T"); ok {
		t.Fatal("topic created although auto-create is off")
	}
	// ...but a retry topic always gets one, with a single queue.
	r := c.call(CodeGetRouteInfoByTopic, map[string]string{"topic": "%RETRY%G"}, nil)
	var route topicRouteData
	if err := json.Unmarshal(r.Body, &route); r.Code != Success || err != nil || route.QueueDatas[0].ReadQueueNums != 1 || route.QueueDatas[0].WriteQueueNums != 1 {
		t.Fatalf("retry route %+v %s", r, r.Body)
	}
	// An existing topic is served as configured.
	be.CreateTopic(meta.TopicConfig{TopicName: "E", ReadQueueNums: 3, WriteQueueNums: 2, Perm: meta.PermRead})
	r = c.call(CodeGetRouteInfoByTopic, map[string]string{"topic": "E"}, nil)
	route = topicRouteData{}
	json.Unmarshal(r.Body, &route)
	if q := route.QueueDatas[0]; q.ReadQueueNums != 3 || q.WriteQueueNums != 2 || q.Perm != meta.PermRead {
		t.Fatalf("existing topic route %+v", q)
	}
	// Invalid names never get a route.
	_, c2 := newNameEnv(t, NameServerConfig{AutoCreateTopics: true}, BrokerIdentity{MasterAddr: "127.0.0.1:1"})
	for _, bad := range []string{"", "a b", strings.Repeat("x", 128)} {
		if r := c2.call(CodeGetRouteInfoByTopic, map[string]string{"topic": bad}, nil); r.Code != TopicNotExist {
			t.Fatalf("%q: %+v", bad, r)
		}
	}
}

func TestValidateTopic(t *testing.T) {
	for name, ok := range map[string]bool{
		"T": true, "%RETRY%g-1_a|b": true, strings.Repeat("x", 127): true,
		"": false, strings.Repeat("x", 128): false, "a.b": false, "a/b": false, "ü": false,
	} {
		if err := meta.ValidateTopicName(name); (err == nil) != ok {
			t.Errorf("meta.ValidateTopicName(%q) = %v", name, err)
		}
	}
}
