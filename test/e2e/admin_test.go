package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/keelmq/keel/host/remoting"
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

// TestAdminResetOffsetByTime: a consumer reads everything; `keel admin
// consumer reset` to a time between two batches commits the group's
// offsets there and pushes RESET_CONSUMER_CLIENT_OFFSET to the live
// consumer, which (rocketmq-client-go's ResetOffset: it waits 10 s, then
// pulls from the new offsets) gets the second batch again and the first
// not.
func TestAdminResetOffsetByTime(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml"})
	const topic, group = "E2E_Reset", "G_Reset"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	call := func(code int16, ext map[string]string) *remoting.Command {
		t.Helper()
		resp, err := remoting.Call(ctx, k.Broker, &remoting.Command{Code: code, ExtFields: remoting.FieldsOf(ext)})
		if err != nil {
			t.Fatalf("code %d: %v", code, err)
		}
		return resp
	}
	if r := call(remoting.CodeUpdateAndCreateTopic, map[string]string{"topic": topic, "defaultTopic": "TBW102",
		"readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "order": "false"}); r.Code != remoting.Success {
		t.Fatalf("create topic: %d %s", r.Code, r.Remark)
	}
	p := newProducer(t, k.Namesrv, "reset-producer")
	first := sendN(t, p, topic, "reset-a", "", 0, 10)
	time.Sleep(100 * time.Millisecond)
	mid := time.Now()
	time.Sleep(100 * time.Millisecond)
	second := sendN(t, p, topic, "reset-b", "", 0, 10)
	all := append(slices.Clone(first), second...)

	got := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: group, instance: "reset-consumer", topic: topic}, got.handler)
	if err := waitFor(30*time.Second, func() bool { return got.hasAll(all) }); err != nil {
		t.Fatalf("consumer missing %s", abbrev(got.missing(all)))
	}
	caughtUp := func() bool {
		r := call(remoting.CodeGetConsumeStats, map[string]string{"consumerGroup": group, "topic": topic})
		stats, err := remoting.DecodeConsumeStats(r.Body)
		if r.Code != remoting.Success || err != nil || len(stats) != 2 {
			return false
		}
		for _, s := range stats {
			if s.Lag() != 0 {
				return false
			}
		}
		return true
	}
	if err := waitFor(20*time.Second, caughtUp); err != nil {
		t.Fatal("the group's committed offsets did not reach the queues' ends")
	}

	out, err := exec.CommandContext(ctx, keelBin, "admin", "consumer", "reset", "--broker", k.Broker,
		"--group", group, "--topic", topic, "--time", mid.UTC().Format(time.RFC3339Nano)).CombinedOutput()
	if err != nil {
		t.Fatalf("keel admin consumer reset: %v\n%s", err, out)
	}
	// The printed table: one line per queue, offsets summing to the
	// first batch.
	var sum int64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != topic {
			t.Fatalf("keel admin consumer reset printed %q", out)
		}
		n, _ := strconv.ParseInt(f[3], 10, 64)
		sum += n
	}
	if sum != int64(len(first)) {
		t.Fatalf("reset offsets sum to %d, want %d (the first batch):\n%s", sum, len(first), out)
	}

	if err := waitFor(60*time.Second, func() bool {
		for _, b := range second {
			if got.count(b) < 2 {
				return false
			}
		}
		return true
	}); err != nil {
		var again []string
		for _, b := range second {
			if got.count(b) < 2 {
				again = append(again, b)
			}
		}
		t.Fatalf("after the reset the consumer did not get again: %s", abbrev(again))
	}
	for _, b := range first {
		if n := got.count(b); n != 1 {
			t.Errorf("%s (stored before the reset time) delivered %d times, want once", b, n)
		}
	}
	if err := waitFor(20*time.Second, caughtUp); err != nil {
		t.Error("the group did not catch up again after the reset")
	}
	keelAdmin := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, keelBin, append([]string{"admin"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("keel admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := keelAdmin("topic", "consumers", topic, "--broker", k.Broker); out != "GROUP\n"+group+"\n" {
		t.Errorf("keel admin topic consumers printed %q, want the header and %s", out, group)
	}
	// The name server's cluster table lists this broker as master (id 0).
	_, port, _ := strings.Cut(k.Broker, ":")
	out = []byte(keelAdmin("cluster", "list", "--namesrv", k.Namesrv))
	if !regexp.MustCompile(`(?m)^\S+\s+\S+\s+0\s+\S+:` + regexp.QuoteMeta(port) + `$`).Match(out) {
		t.Errorf("keel admin cluster list printed\n%s\nwithout this broker (port %s) as id 0", out, port)
	}
}
