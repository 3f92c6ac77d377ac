package namesrv_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	mqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/host/namesrv"
	"github.com/keelmq/keel/host/remoting"
)

// TestRocketMQClientReadsRoutes has the real rocketmq-client-go look up
// routes and the topic list in a name server holding two groups: the
// client must decode the bodies, spread publishing over both groups'
// queues (ids restarting at 0 on each), and publish nothing to a group
// whose master is gone. The broker addresses are never dialled.
func TestRocketMQClientReadsRoutes(t *testing.T) {
	rlog.SetLogLevel("fatal")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := namesrv.New(namesrv.Config{Logger: log})
	rs := remoting.NewServer(remoting.ServerConfig{Logger: log})
	s.Register(rs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rs.Serve(l)
	defer rs.Close()

	tc := func(name string, queues int32) meta.TopicConfig {
		return meta.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: meta.PermRead | meta.PermWrite}
	}
	for _, r := range []namesrv.Registration{
		{Cluster: "C1", BrokerName: "broker-a", BrokerAddr: "127.0.0.1:1", BrokerID: 0, Topics: map[string]meta.TopicConfig{"Both": tc("Both", 2), "SlaveOnly": tc("SlaveOnly", 2)}},
		{Cluster: "C1", BrokerName: "broker-a", BrokerAddr: "127.0.0.1:2", BrokerID: 1, Topics: map[string]meta.TopicConfig{"Both": tc("Both", 2)}},
		{Cluster: "C1", BrokerName: "broker-b", BrokerAddr: "127.0.0.1:3", BrokerID: 0, Topics: map[string]meta.TopicConfig{"Both": tc("Both", 3)}},
		{Cluster: "C1", BrokerName: "broker-c", BrokerAddr: "127.0.0.1:4", BrokerID: 1, Topics: map[string]meta.TopicConfig{"SlaveOnly": tc("SlaveOnly", 5)}},
	} {
		if _, err := s.RegisterBroker(r); err != nil {
			t.Fatal(err)
		}
	}

	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{l.Addr().String()})))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type q struct {
		broker string
		id     int
	}
	queues := func(topic string) []q {
		t.Helper()
		mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
		if err != nil {
			t.Fatalf("route of %s: %v", topic, err)
		}
		var out []q
		for _, mq := range mqs {
			out = append(out, q{mq.BrokerName, mq.QueueId})
		}
		return out
	}
	if got, want := queues("Both"), []q{{"broker-a", 0}, {"broker-a", 1}, {"broker-b", 0}, {"broker-b", 1}, {"broker-b", 2}}; !slices.Equal(got, want) {
		t.Fatalf("Both: %v, want %v", got, want)
	}
	if got, want := queues("SlaveOnly"), []q{{"broker-a", 0}, {"broker-a", 1}}; !slices.Equal(got, want) {
		t.Fatalf("SlaveOnly: %v, want %v (broker-c has no master)", got, want)
	}
	if _, err := adm.FetchPublishMessageQueues(ctx, "Missing"); !errors.Is(err, mqerrors.ErrTopicNotExist) {
		t.Fatalf("missing topic: %v", err)
	}
	tl, err := adm.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tl.TopicList, []string{"Both", "SlaveOnly"}) {
		t.Fatalf("topic list %v", tl.TopicList)
	}
}
