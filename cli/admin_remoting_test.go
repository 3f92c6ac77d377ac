package cli

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// fakeAdminServer serves canned answers on 127.0.0.1 and records the
// header of each request it got, by code.
type fakeAdminServer struct {
	addr string
	mu   sync.Mutex
	got  map[int16]map[string]string
}

func startFakeAdminServer(t *testing.T, answers map[int16]func() *remoting.Command) *fakeAdminServer {
	t.Helper()
	f := &fakeAdminServer{got: map[int16]map[string]string{}}
	s := remoting.NewServer(remoting.ServerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for code, answer := range answers {
		s.Handle(code, func(req *remoting.Request) *remoting.Command {
			ext := map[string]string{}
			for _, kv := range req.Cmd.ExtFields {
				ext[kv.Key] = kv.Value
			}
			f.mu.Lock()
			f.got[code] = ext
			f.mu.Unlock()
			a := answer()
			resp := remoting.NewResponse(req.Cmd, a.Code, a.Remark)
			resp.Body = a.Body
			return resp
		})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	f.addr = l.Addr().String()
	return f
}

func (f *fakeAdminServer) header(code int16) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got[code]
}

func runAdmin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(append([]string{"admin"}, args...), WithOutput(&out))
	return out.String(), err
}

func success(body []byte) func() *remoting.Command {
	return func() *remoting.Command { return &remoting.Command{Code: remoting.Success, Body: body} }
}

func TestAdminConsumerResetTopicConsumersClusterList(t *testing.T) {
	table := []remoting.QueueOffset{
		{Queue: remoting.MessageQueue{BrokerName: "broker-a", QueueID: 1, Topic: "orders"}, Offset: 0},
		{Queue: remoting.MessageQueue{BrokerName: "broker-a", QueueID: 0, Topic: "orders"}, Offset: 3},
	}
	f := startFakeAdminServer(t, map[int16]func() *remoting.Command{
		remoting.CodeInvokeBrokerToResetOffset: success(remoting.EncodeResetOffsetBody(table)),
		remoting.CodeQueryTopicConsumeByWho:    success([]byte(`{"groupList":["audit","billing"]}`)),
		remoting.CodeGetBrokerClusterInfo: success([]byte(`{"brokerAddrTable":{"broker-b":{"brokerAddrs":{0:"10.0.0.3:10911"},"brokerName":"broker-b","cluster":"C"},` +
			`"broker-a":{"brokerAddrs":{1:"10.0.0.2:10911",0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"C"}},"clusterAddrTable":{"C":["broker-a","broker-b"]}}`)),
		remoting.CodeGetConsumeStats: func() *remoting.Command {
			return &remoting.Command{Code: remoting.SubscriptionGroupNotExist, Remark: "no such group"}
		},
	})

	out, err := runAdmin(t, "consumer", "reset", "--broker", f.addr, "--group", "billing", "--topic", "orders", "--time", "2026-12-02T03:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	want := "TOPIC   BROKER    QUEUE  OFFSET\norders  broker-a  0      3\norders  broker-a  1      0\n"
	if out != want {
		t.Errorf("consumer reset printed\n%q\nwant\n%q", out, want)
	}
	wantTS := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC).UnixMilli()
	h := f.header(remoting.CodeInvokeBrokerToResetOffset)
	if h["timestamp"] != strconv.FormatInt(wantTS, 10) || h["isForce"] != "true" || h["group"] != "billing" || h["topic"] != "orders" {
		t.Errorf("reset header %v, want timestamp %d, isForce true", h, wantTS)
	}
	if _, err := runAdmin(t, "consumer", "reset", "--broker", f.addr, "--group", "billing", "--topic", "orders", "--time", "1700000000000", "--force=false"); err != nil {
		t.Fatal(err)
	}
	if h := f.header(remoting.CodeInvokeBrokerToResetOffset); h["timestamp"] != "1700000000000" || h["isForce"] != "false" {
		t.Errorf("reset header with unix ms and --force=false: %v", h)
	}

	out, err = runAdmin(t, "topic", "consumers", "orders", "--broker", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	if out != "GROUP\naudit\nbilling\n" || f.header(remoting.CodeQueryTopicConsumeByWho)["topic"] != "orders" {
		t.Errorf("topic consumers printed %q (header %v)", out, f.header(remoting.CodeQueryTopicConsumeByWho))
	}

	out, err = runAdmin(t, "cluster", "list", "--namesrv", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	want = "CLUSTER  BROKER    ID  ADDR\nC        broker-a  0   10.0.0.1:10911\nC        broker-a  1   10.0.0.2:10911\nC        broker-b  0   10.0.0.3:10911\n"
	if out != want {
		t.Errorf("cluster list printed\n%q\nwant\n%q", out, want)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"consumer", "reset", "--broker", f.addr, "--group", "g", "--topic", "t"}, "--time is required"},
		{[]string{"consumer", "reset", "--broker", f.addr, "--group", "g", "--topic", "t", "--time", "yesterday"}, "neither Unix milliseconds nor an RFC3339"},
		{[]string{"consumer", "reset", "--broker", f.addr, "--group", "g", "--topic", "t", "--time", "-7"}, "cannot be negative"},
		{[]string{"cluster", "list", "--broker", f.addr}, "--namesrv is required"},
		{[]string{"topic", "consumers", "--broker", f.addr}, "--topic is required"},
		{[]string{"consumer", "progress", "--broker", f.addr, "--group", "g"}, "answered code 26: no such group"},
	} {
		if _, err := runAdmin(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestAdminHelp: `keel admin --help` (and help, -h) prints every admin
// command and succeeds, where it used to be an unknown command.
func TestAdminHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "help"} {
		out, err := runOut(t, "admin", arg)
		if err != nil || !strings.Contains(out, "keel admin (status|promote|force-writes)") || !strings.Contains(out, "keel admin consumer reset") {
			t.Errorf("keel admin %s: %v\n%s", arg, err, out)
		}
	}
}

// TestAdminConsumerProgressOfNoGroup: a broker that answers an empty
// offset table (keel and RocketMQ both do for a group they do not know)
// makes consumer progress fail, as mqadmin's does, instead of printing a
// total lag of 0 that reads as a healthy group.
func TestAdminConsumerProgressOfNoGroup(t *testing.T) {
	f := startFakeAdminServer(t, map[int16]func() *remoting.Command{
		remoting.CodeGetConsumeStats: success([]byte(`{"offsetTable":{},"consumeTps":0.0}`)),
	})
	out, err := runAdmin(t, "consumer", "progress", "--broker", f.addr, "--group", "nosuch")
	if err == nil || !strings.Contains(err.Error(), `no consumer offsets for group "nosuch"`) {
		t.Fatalf("consumer progress of an unknown group: %v\n%s", err, out)
	}
}
