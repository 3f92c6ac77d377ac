package namesrv

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/host/remoting"
)

const (
	aMaster, aSlave = "10.0.0.1:10911", "10.0.0.2:10911"
	bMaster, bSlave = "10.0.1.1:10911", "10.0.1.2:10911"
)

// registerTwoGroups registers broker-a and broker-b, each a master and a
// slave, each on its own connection; topic T has 4 queues on a and 8 on b
// (the slaves list other counts, which must not show while the masters
// live), Only-A is on a alone.
func registerTwoGroups(t *testing.T, addr string) map[string]*nsClient {
	t.Helper()
	conns := map[string]*nsClient{}
	for _, r := range []Registration{
		reg("C1", "broker-a", aMaster, 0, topic("T", 4), topic("Only-A", 2)),
		reg("C1", "broker-a", aSlave, 1, topic("T", 3), topic("Only-A", 2)),
		reg("C1", "broker-b", bMaster, 0, topic("T", 8)),
		reg("C1", "broker-b", bSlave, 1, topic("T", 7)),
	} {
		c := dial(t, addr)
		registerWire(t, c, r)
		conns[r.BrokerAddr] = c
	}
	return conns
}

func TestRouteSpansGroupsWithSlavesAtTheirIDs(t *testing.T) {
	_, _, addr := newTestServer(t, Config{})
	registerTwoGroups(t, addr)
	c := dial(t, addr)
	rd, ok := routeOf(t, c, "T")
	if !ok {
		t.Fatal("no route for T")
	}
	wantQ := []queueData{
		{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
		{BrokerName: "broker-b", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6},
	}
	wantB := []brokerData{
		{Cluster: "C1", BrokerName: "broker-a", BrokerAddrs: map[string]string{"0": aMaster, "1": aSlave}},
		{Cluster: "C1", BrokerName: "broker-b", BrokerAddrs: map[string]string{"0": bMaster, "1": bSlave}},
	}
	if !reflect.DeepEqual(rd.QueueDatas, wantQ) || !reflect.DeepEqual(rd.BrokerDatas, wantB) {
		t.Fatalf("route\n got %+v %+v\nwant %+v %+v", rd.QueueDatas, rd.BrokerDatas, wantQ, wantB)
	}
	rd, _ = routeOf(t, c, "Only-A")
	if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].BrokerName != "broker-a" || len(rd.BrokerDatas) != 1 {
		t.Fatalf("Only-A route %+v", rd)
	}
	resp := call(t, c, request(remoting.CodeGetRouteInfoByTopic, map[string]string{"topic": "Nope"}, nil))
	if resp.Code != remoting.TopicNotExist || !strings.HasPrefix(resp.Remark, "No topic route info in name server for the topic: Nope") {
		t.Fatalf("missing topic: %d %q", resp.Code, resp.Remark)
	}
}

func TestRegisterAnswersSlaveWithItsMaster(t *testing.T) {
	_, _, addr := newTestServer(t, Config{})
	c := dial(t, addr)
	resp := registerWire(t, c, reg("C1", "broker-a", aSlave, 1))
	if resp.Ext("masterAddr") != "" {
		t.Fatalf("slave before master got master %q", resp.Ext("masterAddr"))
	}
	resp = registerWire(t, c, reg("C1", "broker-a", aMaster, 0))
	if _, ok := resp.ExtFields.Get("masterAddr"); ok {
		t.Fatalf("master got masterAddr %q", resp.Ext("masterAddr"))
	}
	resp = registerWire(t, c, reg("C1", "broker-a", aSlave, 1))
	if resp.Ext("masterAddr") != aMaster || resp.Ext("haServerAddr") != aMaster+"-ha" {
		t.Fatalf("slave answer %v", resp.ExtFields)
	}
}

func TestMasterGoneSlaveServesReadOnly(t *testing.T) {
	_, _, addr := newTestServer(t, Config{})
	registerTwoGroups(t, addr)
	c := dial(t, addr)
	resp := call(t, c, request(remoting.CodeUnregisterBroker, map[string]string{"brokerName": "broker-a", "brokerAddr": aMaster, "clusterName": "C1", "brokerId": "0"}, nil))
	if resp.Code != remoting.Success {
		t.Fatalf("unregister: %d %q", resp.Code, resp.Remark)
	}
	rd, _ := routeOf(t, c, "T")
	if len(rd.QueueDatas) != 2 {
		t.Fatalf("route %+v", rd)
	}
	// broker-a now shows its slave's table (3 queues), readable only.
	if q := rd.QueueDatas[0]; q.BrokerName != "broker-a" || q.Perm != meta.PermRead || q.ReadQueueNums != 3 {
		t.Fatalf("slave-only group's queues %+v", q)
	}
	if q := rd.QueueDatas[1]; q.Perm != meta.PermRead|meta.PermWrite {
		t.Fatalf("broker-b lost its write perm: %+v", q)
	}
	if got := rd.BrokerDatas[0].BrokerAddrs; !reflect.DeepEqual(got, map[string]string{"1": aSlave}) {
		t.Fatalf("broker-a addrs %v", got)
	}
	// The slave promoted to id 0 replaces its id-1 entry and writes again.
	registerWire(t, c, reg("C1", "broker-a", aSlave, 0, topic("T", 3)))
	rd, _ = routeOf(t, c, "T")
	if got := rd.BrokerDatas[0].BrokerAddrs; !reflect.DeepEqual(got, map[string]string{"0": aSlave}) {
		t.Fatalf("after promotion addrs %v", got)
	}
	if q := rd.QueueDatas[0]; q.Perm != meta.PermRead|meta.PermWrite {
		t.Fatalf("promoted master's queues %+v", q)
	}
}

func TestBrokersListsEveryRegistration(t *testing.T) {
	s, clk, addr := newTestServer(t, Config{})
	registerTwoGroups(t, addr)
	mustRegister(t, s, reg("C0", "broker-z", "10.9.9.9:1", 0))
	got := s.Brokers()
	var names []string
	for _, b := range got {
		names = append(names, b.Cluster+"/"+b.BrokerName+"/"+strconv.FormatInt(b.BrokerID, 10)+"/"+b.BrokerAddr)
	}
	want := []string{"C0/broker-z/0/10.9.9.9:1", "C1/broker-a/0/" + aMaster, "C1/broker-a/1/" + aSlave, "C1/broker-b/0/" + bMaster, "C1/broker-b/1/" + bSlave}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("brokers %v, want %v", names, want)
	}
	if b := got[1]; b.Topics != 2 || !b.Wire || b.HAServerAddr != aMaster+"-ha" || !b.LastUpdate.Equal(clk.Now()) || b.Timeout != DefaultExpireAfter {
		t.Fatalf("broker-a master %+v", b)
	}
	if got[0].Wire {
		t.Fatal("an in-process registration reported as wire")
	}
}

func TestDisplacedHolderOfAnIDIsForgotten(t *testing.T) {
	s, _, _ := newTestServer(t, Config{})
	mustRegister(t, s, reg("C1", "broker-a", aMaster, 0, topic("T", 4)))
	mustRegister(t, s, reg("C1", "broker-a", aSlave, 0, topic("T", 2)))
	s.mu.Lock()
	_, old := s.reg.brokers[brokerKey{"C1", aMaster}]
	rd, _ := s.reg.route("T")
	s.mu.Unlock()
	if old || len(rd.BrokerDatas) != 1 || !reflect.DeepEqual(rd.BrokerDatas[0].BrokerAddrs, map[string]string{"0": aSlave}) {
		t.Fatalf("old holder kept=%v route %+v", old, rd)
	}
}

func TestStaleStateVersionRefused(t *testing.T) {
	s, _, _ := newTestServer(t, Config{})
	r := reg("C1", "broker-a", aSlave, 0)
	r.DataVersion.StateVersion = 5
	mustRegister(t, s, r)
	old := reg("C1", "broker-a", aMaster, 0)
	old.DataVersion.StateVersion = 4
	if _, err := s.RegisterBroker(old); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("stale registration: %v", err)
	}
}

func TestBrokerNameBelongsToOneCluster(t *testing.T) {
	s, _, _ := newTestServer(t, Config{})
	mustRegister(t, s, reg("C1", "broker-a", aMaster, 0))
	if _, err := s.RegisterBroker(reg("C2", "broker-a", aSlave, 1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cross-cluster name: %v", err)
	}
}

func mustRegister(t *testing.T, s *Server, r Registration) RegisterResult {
	t.Helper()
	res, err := s.RegisterBroker(r)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestExpiryWithFakeClock(t *testing.T) {
	s, clk, addr := newTestServer(t, Config{})
	mustRegister(t, s, reg("C1", "broker-a", aMaster, 0, topic("T", 4)))
	short := reg("C1", "broker-c", "10.0.2.1:10911", 0, topic("T", 1))
	short.HeartbeatTimeout = 10 * time.Second
	mustRegister(t, s, short)
	clk.advance(100 * time.Second)
	mustRegister(t, s, reg("C1", "broker-b", bMaster, 0, topic("T", 8)))
	s.scan()
	c := dial(t, addr)
	rd, _ := routeOf(t, c, "T")
	if len(rd.QueueDatas) != 2 {
		t.Fatalf("after 100 s: %+v (broker-c's 10 s timeout should have dropped it)", rd.QueueDatas)
	}
	clk.advance(20 * time.Second) // a silent for 120 s: not yet more
	s.scan()
	if rd, _ := routeOf(t, c, "T"); len(rd.QueueDatas) != 2 {
		t.Fatalf("at exactly 120 s: %+v", rd.QueueDatas)
	}
	clk.advance(time.Second)
	s.scan()
	rd, _ = routeOf(t, c, "T")
	if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].BrokerName != "broker-b" {
		t.Fatalf("after 121 s: %+v", rd.QueueDatas)
	}
	resp := call(t, c, request(remoting.CodeGetBrokerClusterInfo, nil, nil))
	var ci clusterInfo
	if err := json.Unmarshal(resp.Body, &ci); err != nil || len(ci.BrokerAddrTable) != 1 || !reflect.DeepEqual(ci.ClusterAddrTable, map[string][]string{"C1": {"broker-b"}}) {
		t.Fatalf("cluster info %s: %v", resp.Body, err)
	}
}

func TestScanLoopRuns(t *testing.T) {
	s, clk, _ := newTestServer(t, Config{ScanInterval: 5 * time.Millisecond})
	mustRegister(t, s, reg("C1", "broker-a", aMaster, 0, topic("T", 4)))
	s.Start()
	defer s.Close()
	clk.advance(DefaultExpireAfter + time.Second)
	waitFor(t, "expiry by the scan loop", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.reg.brokers) == 0 && len(s.reg.groups) == 0 && len(s.reg.clusters) == 0
	})
	s.Close()
	s.Close()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConnectionCloseDropsItsBrokers(t *testing.T) {
	_, _, addr := newTestServer(t, Config{})
	conns := registerTwoGroups(t, addr)
	c := dial(t, addr)
	// broker-b's master re-registers on a new connection: closing the
	// old one must not drop it.
	fresh := dial(t, addr)
	registerWire(t, fresh, reg("C1", "broker-b", bMaster, 0, topic("T", 8)))
	conns[bMaster].close()
	conns[aMaster].close()
	waitFor(t, "broker-a's master dropped", func() bool {
		rd, _ := routeOf(t, c, "T")
		return len(rd.BrokerDatas) == 2 && len(rd.BrokerDatas[0].BrokerAddrs) == 1
	})
	rd, _ := routeOf(t, c, "T")
	if got := rd.BrokerDatas[1].BrokerAddrs; len(got) != 2 {
		t.Fatalf("broker-b lost a member: %v", got)
	}
}

func TestDeleteTopicInNamesrv(t *testing.T) {
	_, _, addr := newTestServer(t, Config{})
	conns := registerTwoGroups(t, addr)
	c := dial(t, addr)
	del := func(hdr map[string]string) {
		t.Helper()
		if resp := call(t, c, request(remoting.CodeDeleteTopicInNameServer, hdr, nil)); resp.Code != remoting.Success {
			t.Fatalf("216 %v: %d %q", hdr, resp.Code, resp.Remark)
		}
	}
	del(map[string]string{"topic": "T", "clusterName": "other"})
	if _, ok := routeOf(t, c, "T"); !ok {
		t.Fatal("216 for another cluster removed T")
	}
	del(map[string]string{"topic": "T"})
	if _, ok := routeOf(t, c, "T"); ok {
		t.Fatal("T still routed after 216")
	}
	if _, ok := routeOf(t, c, "Only-A"); !ok {
		t.Fatal("216 of T removed Only-A")
	}
	registerWire(t, conns[bMaster], reg("C1", "broker-b", bMaster, 0, topic("T", 8)))
	rd, ok := routeOf(t, c, "T")
	if !ok || len(rd.QueueDatas) != 1 || rd.QueueDatas[0].BrokerName != "broker-b" {
		t.Fatalf("after broker-b re-registered: %+v", rd)
	}
	resp := call(t, c, request(remoting.CodeDeleteTopicInNameServer, nil, nil))
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "header field topic is missing") {
		t.Fatalf("216 without topic: %d %q", resp.Code, resp.Remark)
	}
}

func TestTopicListAndClusterInfoCoverTheCluster(t *testing.T) {
	_, _, addr := newTestServer(t, Config{})
	registerTwoGroups(t, addr)
	c := dial(t, addr)
	resp := call(t, c, request(remoting.CodeGetAllTopicListFromNameServer, nil, nil))
	if string(resp.Body) != `{"topicList":["Only-A","T"]}` {
		t.Fatalf("206 body %s", resp.Body)
	}
	resp = call(t, c, request(remoting.CodeGetBrokerClusterInfo, nil, nil))
	want := `{"brokerAddrTable":{"broker-a":{"cluster":"C1","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}},` +
		`"broker-b":{"cluster":"C1","brokerName":"broker-b","brokerAddrs":{"0":"10.0.1.1:10911","1":"10.0.1.2:10911"}}},"clusterAddrTable":{"C1":["broker-a","broker-b"]}}`
	if string(resp.Body) != want {
		t.Fatalf("106 body\n got %s\nwant %s", resp.Body, want)
	}
}

func TestQueryDataVersion(t *testing.T) {
	s, clk, addr := newTestServer(t, Config{})
	r := reg("C1", "broker-a", aMaster, 0, topic("T", 4))
	mustRegister(t, s, r)
	c := dial(t, addr)
	hdr := map[string]string{"brokerName": "broker-a", "brokerAddr": aMaster, "clusterName": "C1", "brokerId": "0"}
	query := func(v meta.DataVersion, h map[string]string) *remoting.Command {
		return call(t, c, request(remoting.CodeQueryDataVersion, h, mustJSON(v)))
	}
	clk.advance(110 * time.Second)
	resp := query(r.DataVersion, hdr)
	var held meta.DataVersion
	if resp.Code != remoting.Success || resp.Ext("changed") != "false" || json.Unmarshal(resp.Body, &held) != nil || held != r.DataVersion {
		t.Fatalf("same version: %d %v %s", resp.Code, resp.ExtFields, resp.Body)
	}
	if resp := query(r.DataVersion.Next(), hdr); resp.Ext("changed") != "true" {
		t.Fatalf("newer version: %v", resp.ExtFields)
	}
	other := map[string]string{"brokerName": "broker-a", "brokerAddr": aSlave, "clusterName": "C1", "brokerId": "1"}
	if resp := query(r.DataVersion, other); resp.Ext("changed") != "true" || len(resp.Body) != 0 {
		t.Fatalf("unknown broker: %v %s", resp.ExtFields, resp.Body)
	}
	// The query renewed the registration: 20 s later (130 s after it
	// registered) the broker is still there.
	clk.advance(20 * time.Second)
	s.scan()
	if _, ok := routeOf(t, c, "T"); !ok {
		t.Fatal("QUERY_DATA_VERSION did not renew the registration")
	}
	if resp := call(t, c, request(remoting.CodeQueryDataVersion, hdr, []byte("{"))); resp.Code != remoting.SystemError {
		t.Fatalf("bad body: %d", resp.Code)
	}
}

// creator is a TopicCreator that registers a one-queue topic with its
// server, for names starting with "auto".
type creator struct {
	s     *Server
	calls atomic.Int32
}

func (c *creator) EnsureTopic(name string) (bool, error) {
	c.calls.Add(1)
	if name == "fail" {
		return false, errors.New("disk on fire")
	}
	if !strings.HasPrefix(name, "auto") {
		return false, nil
	}
	_, err := c.s.RegisterBroker(reg("C1", "broker-a", aMaster, 0, topic(name, 1)))
	return err == nil, err
}

func TestCreatorOnRouteMiss(t *testing.T) {
	cr := &creator{}
	s, _, addr := newTestServer(t, Config{Creator: cr})
	cr.s = s
	c := dial(t, addr)
	rd, ok := routeOf(t, c, "autoT")
	if !ok || len(rd.QueueDatas) != 1 || rd.QueueDatas[0].WriteQueueNums != 1 {
		t.Fatalf("auto-created route %+v", rd)
	}
	routeOf(t, c, "autoT")
	if n := cr.calls.Load(); n != 1 {
		t.Fatalf("creator asked %d times, want 1 (the second lookup hits)", n)
	}
	if _, ok := routeOf(t, c, "manual"); ok || cr.calls.Load() != 2 {
		t.Fatalf("refused creation: ok=%v calls=%d", ok, cr.calls.Load())
	}
	if _, ok := routeOf(t, c, "bad name"); ok || cr.calls.Load() != 2 {
		t.Fatalf("invalid name reached the creator: calls=%d", cr.calls.Load())
	}
	resp := call(t, c, request(remoting.CodeGetRouteInfoByTopic, map[string]string{"topic": "fail"}, nil))
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "disk on fire") {
		t.Fatalf("creator error: %d %q", resp.Code, resp.Remark)
	}
}

func TestBadRegistrationsRefused(t *testing.T) {
	_, _, addr := newTestServer(t, Config{})
	c := dial(t, addr)
	good, err := newRegisterRequest(reg("C1", "broker-a", aMaster, 0, topic("T", 4)), false)
	if err != nil {
		t.Fatal(err)
	}
	zipped, err := newRegisterRequest(reg("C1", "broker-a", aMaster, 0, topic("T", 4)), true)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(base *remoting.Command, f func(*remoting.Command)) *remoting.Command {
		cmd := &remoting.Command{Code: base.Code, ExtFields: append(remoting.Fields(nil), base.ExtFields...), Body: base.Body}
		f(cmd)
		return cmd
	}
	without := func(k string) func(*remoting.Command) {
		return func(cmd *remoting.Command) {
			m := cmd.ExtFields.Map()
			delete(m, k)
			cmd.ExtFields = remoting.FieldsOf(m)
		}
	}
	for _, tc := range []struct {
		name   string
		cmd    *remoting.Command
		remark string
	}{
		{"no brokerName", edit(good, without("brokerName")), "header field brokerName is missing"},
		{"no haServerAddr", edit(good, without("haServerAddr")), "header field haServerAddr is missing"},
		{"no brokerId", edit(good, without("brokerId")), "header field brokerId is missing"},
		{"bad brokerId", edit(good, func(c *remoting.Command) { c.SetExt("brokerId", "x") }), `header field brokerId="x" is not an int64`},
		{"negative brokerId", edit(good, func(c *remoting.Command) { c.SetExt("brokerId", "-1") }), "broker id -1 is negative"},
		{"bad crc", edit(good, func(c *remoting.Command) { c.SetExt("bodyCrc32", "12345") }), "crc32 not match"},
		{"truncated zlib", edit(zipped, func(c *remoting.Command) { c.Body = c.Body[:len(c.Body)/2]; c.SetExt("bodyCrc32", "0") }), "unexpected EOF"},
		{"JSON flagged as zlib", edit(good, func(c *remoting.Command) { c.SetExt("compressed", "true") }), "zlib: invalid header"},
		{"bad topic", edit(good, func(c *remoting.Command) {
			c.Body = []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":0,"writeQueueNums":1,"perm":6}}}}`)
			c.SetExt("bodyCrc32", "0")
		}), "readQueueNums 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := call(t, c, tc.cmd)
			if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, tc.remark) {
				t.Fatalf("got %d %q, want SYSTEM_ERROR containing %q", resp.Code, resp.Remark, tc.remark)
			}
			if tc.name == "bad crc" && resp.Remark != "crc32 not match" {
				t.Fatalf("crc remark %q, want RocketMQ's exactly", resp.Remark)
			}
		})
	}
	if _, ok := routeOf(t, c, "T"); ok {
		t.Fatal("a refused registration registered")
	}
	// RocketMQ 5's quirk: a compressed body flagged compressed=false.
	registerWireCmd(t, c, edit(zipped, func(c *remoting.Command) { c.SetExt("compressed", "false") }))
	if rd, ok := routeOf(t, c, "T"); !ok || rd.QueueDatas[0].WriteQueueNums != 4 {
		t.Fatalf("zlib body flagged as JSON: %+v", rd)
	}
	for _, code := range []int16{remoting.CodeUnregisterBroker, remoting.CodeQueryDataVersion} {
		resp := call(t, c, request(code, map[string]string{"brokerName": "broker-a", "clusterName": "C1", "brokerId": "0"}, nil))
		if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "header field brokerAddr is missing") {
			t.Fatalf("code %d without brokerAddr: %d %q", code, resp.Code, resp.Remark)
		}
	}
}
