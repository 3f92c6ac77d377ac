package namesrv

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/host/remoting"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// serve runs s on a remoting server on 127.0.0.1:0 until the test ends and
// returns its address.
func serve(t testing.TB, s *Server) string {
	t.Helper()
	rs := remoting.NewServer(remoting.ServerConfig{Logger: quietLogger()})
	s.Register(rs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rs.Serve(l)
	t.Cleanup(func() { rs.Close() })
	return l.Addr().String()
}

// newTestServer returns a Server on a fake clock, served on the wire.
func newTestServer(t testing.TB, cfg Config) (*Server, *fakeClock, string) {
	t.Helper()
	clk := newFakeClock()
	cfg.Now = clk.Now
	cfg.Logger = quietLogger()
	s := New(cfg)
	return s, clk, serve(t, s)
}

// dial returns a persistent client to addr, closed when the test ends.
func dial(t testing.TB, addr string) *nsClient {
	c := newNSClient(addr)
	t.Cleanup(c.close)
	return c
}

// call sends cmd on c and fails the test on a transport error.
func call(t testing.TB, c *nsClient, cmd *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.call(ctx, cmd)
	if err != nil {
		t.Fatalf("code %d: %v", cmd.Code, err)
	}
	return resp
}

func request(code int16, hdr map[string]string, body []byte) *remoting.Command {
	return &remoting.Command{Code: code, ExtFields: remoting.FieldsOf(hdr), Body: body}
}

func topic(name string, queues int32) meta.TopicConfig {
	return meta.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: meta.PermRead | meta.PermWrite, TopicFilterType: meta.FilterSingleTag}
}

func topics(tcs ...meta.TopicConfig) map[string]meta.TopicConfig {
	m := map[string]meta.TopicConfig{}
	for _, tc := range tcs {
		m[tc.TopicName] = tc
	}
	return m
}

func reg(cluster, name, addr string, id int64, tcs ...meta.TopicConfig) Registration {
	return Registration{Cluster: cluster, BrokerName: name, BrokerAddr: addr, BrokerID: id, HAServerAddr: addr + "-ha", Topics: topics(tcs...), DataVersion: meta.DataVersion{Timestamp: 1, Counter: int64(len(tcs))}}
}

// registerWire registers r over c and fails the test unless it succeeds.
func registerWire(t testing.TB, c *nsClient, r Registration) *remoting.Command {
	t.Helper()
	cmd, err := newRegisterRequest(r, false)
	if err != nil {
		t.Fatal(err)
	}
	return registerWireCmd(t, c, cmd)
}

func registerWireCmd(t testing.TB, c *nsClient, cmd *remoting.Command) *remoting.Command {
	t.Helper()
	resp := call(t, c, cmd)
	if resp.Code != remoting.Success {
		t.Fatalf("register %s: code %d %q", cmd.Ext("brokerAddr"), resp.Code, resp.Remark)
	}
	return resp
}

// routeOf asks for topic's route over c; ok is false on TOPIC_NOT_EXIST.
func routeOf(t testing.TB, c *nsClient, topic string) (topicRouteData, bool) {
	t.Helper()
	resp := call(t, c, request(remoting.CodeGetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
	if resp.Code == remoting.TopicNotExist {
		return topicRouteData{}, false
	}
	if resp.Code != remoting.Success {
		t.Fatalf("route %s: code %d %q", topic, resp.Code, resp.Remark)
	}
	var rd topicRouteData
	if err := json.Unmarshal(resp.Body, &rd); err != nil {
		t.Fatalf("route body %s: %v", resp.Body, err)
	}
	return rd, true
}
