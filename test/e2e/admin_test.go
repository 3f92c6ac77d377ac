package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestClientGoAdminTopics drives keel with rocketmq-client-go's admin
// package, which ignores response codes: the topic must really be created
// with 8 queues, listed, and deleted from broker and route.
func TestClientGoAdminTopics(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	// Without auto-creation, a route lookup cannot bring a deleted topic
	// back (RocketMQ's name server never creates topics).
	k := startKeel(t, keelConfig{profile: "default.toml", extra: []string{"store.auto_create_topics=false"}})
	const topic = "E2E_Admin"
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{k.Namesrv})))
	if err != nil {
		t.Fatalf("NewAdmin: %v", err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(k.Broker)); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
	if err != nil || len(mqs) != 8 {
		t.Fatalf("FetchPublishMessageQueues after CreateTopic: %d queues, %v; want 8", len(mqs), err)
	}
	p := newProducer(t, k.Namesrv, "admin-producer")
	seen := map[int]bool{}
	for i := 0; i < 32 && len(seen) < 8; i++ {
		res, err := sendSync(p, primitive.NewMessage(topic, []byte("admin")))
		if err != nil {
			t.Fatalf("SendSync: %v", err)
		}
		seen[res.MessageQueue.QueueId] = true
	}
	for q := range seen {
		if q < 0 || q >= 8 {
			t.Fatalf("producer sent to queue %d of an 8-queue topic", q)
		}
	}
	if len(seen) != 8 {
		t.Errorf("32 round-robin sends reached %d queues, want 8", len(seen))
	}

	list, err := adm.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatalf("FetchAllTopicList: %v", err)
	}
	if !slices.Contains(list.TopicList, topic) {
		t.Fatalf("FetchAllTopicList: %v lacks %s", list.TopicList, topic)
	}

	if err := adm.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(k.Broker), admin.WithNameSrvAddr([]string{k.Namesrv})); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	list, err = adm.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatalf("FetchAllTopicList after delete: %v", err)
	}
	if slices.Contains(list.TopicList, topic) {
		t.Fatalf("FetchAllTopicList after DeleteTopic still lists %s", topic)
	}
	// (FetchPublishMessageQueues would answer from the client's route
	// cache, which a TOPIC_NOT_EXIST lookup does not clear.)
}
