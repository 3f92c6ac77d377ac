package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestSendSyncThenPushConsumerReceivesAll: 200 messages sent with SendSync
// (half before the consumer starts, half while it long-polls) reach a
// clustering push consumer exactly once each, with topic, keys and msgId
// intact; every send reports SEND_OK with increasing queue offsets.
func TestSendSyncThenPushConsumerReceivesAll(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml"})
	const topic, group = "E2E_All", "G_All"
	p := newProducer(t, k.Namesrv, "all-producer")

	msgIDs := map[string]string{} // body -> SendResult.MsgID
	lastOffset := map[int]int64{} // queue -> last queue offset acked
	var bodies []string
	send := func(from, n int) {
		for i := from; i < from+n; i++ {
			body := fmt.Sprintf("all-%06d", i)
			m := primitive.NewMessage(topic, []byte(body))
			m.WithKeys([]string{body})
			res, err := sendSync(p, m)
			if err != nil {
				t.Fatalf("SendSync %s: %v", body, err)
			}
			if res.Status != primitive.SendOK {
				t.Fatalf("SendSync %s: status %d, want SEND_OK", body, res.Status)
			}
			if res.MsgID == "" || res.OffsetMsgID == "" || res.MessageQueue == nil {
				t.Fatalf("SendSync %s: incomplete result %v", body, res)
			}
			q := res.MessageQueue.QueueId
			if last, ok := lastOffset[q]; ok && res.QueueOffset <= last {
				t.Fatalf("SendSync %s: queue %d offset %d not after the previous ack's %d", body, q, res.QueueOffset, last)
			}
			lastOffset[q] = res.QueueOffset
			msgIDs[body] = res.MsgID
			bodies = append(bodies, body)
		}
	}
	send(0, 100)
	got := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: group, instance: "all-consumer", topic: topic}, got.handler)
	send(100, 100)

	if err := waitFor(30*time.Second, func() bool { return got.hasAll(bodies) }); err != nil {
		d, n := got.distinct()
		t.Fatalf("consumer got %d distinct of %d sent (%d deliveries) within 30s; missing: %s",
			d, len(bodies), n, abbrev(got.missing(bodies)))
	}
	if u := got.unexpected(bodies); len(u) > 0 {
		t.Errorf("consumer got bodies that were never sent: %s", abbrev(u))
	}
	if d := got.duplicates(); len(d) > 0 {
		t.Errorf("%d messages delivered more than once in a single-consumer run without restarts: %s", len(d), abbrev(d))
	}
	for _, b := range bodies {
		m := got.first(b)
		if m.Topic != topic || m.GetKeys() != b || m.MsgId != msgIDs[b] {
			t.Errorf("message %s arrived as topic %q keys %q msgId %q; want %q %q %q",
				b, m.Topic, m.GetKeys(), m.MsgId, topic, b, msgIDs[b])
		}
	}
	if len(lastOffset) < 2 {
		t.Errorf("the producer used %d queue(s); route data should offer several write queues", len(lastOffset))
	}
}

// TestCommittedOffsetsSurviveConsumerRestart: a consumer reads a first
// batch and shuts down (committing its offsets); a new consumer in the same
// group gets the second batch and not the first one again.
func TestCommittedOffsetsSurviveConsumerRestart(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml"})
	const topic, group = "E2E_Offsets", "G_Offsets"
	p := newProducer(t, k.Namesrv, "offsets-producer")

	first := sendN(t, p, topic, "first", "", 0, 100)
	got1 := newReceived()
	c1 := startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: group, instance: "offsets-consumer-1", topic: topic}, got1.handler)
	if err := waitFor(30*time.Second, func() bool { return got1.hasAll(first) }); err != nil {
		t.Fatalf("first consumer: missing within 30s: %s", abbrev(got1.missing(first)))
	}
	if err := c1.Shutdown(); err != nil {
		t.Fatalf("first consumer Shutdown: %v", err)
	}

	second := sendN(t, p, topic, "second", "", 0, 100)
	got2 := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: group, instance: "offsets-consumer-2", topic: topic}, got2.handler)
	if err := waitFor(30*time.Second, func() bool { return got2.hasAll(second) }); err != nil {
		t.Fatalf("second consumer: missing within 30s: %s", abbrev(got2.missing(second)))
	}
	var again []string
	for _, b := range first {
		if got2.has(b) {
			again = append(again, b)
		}
	}
	// At-least-once allows a few redeliveries at the commit boundary; a
	// consumer that starts from the beginning gets all 100 again.
	if len(again) > 10 {
		t.Errorf("the restarted consumer re-received %d of the %d messages the first one consumed and committed: %s",
			len(again), len(first), abbrev(again))
	} else if len(again) > 0 {
		t.Logf("%d redeliveries at the commit boundary (allowed): %s", len(again), abbrev(again))
	}
}

// TestTagFiltering: a consumer subscribed to TagA gets every TagA message
// and no TagB message, and the broker filters them (the pulled-message
// counter shows TagB messages were not shipped to the client, which would
// otherwise drop them itself).
func TestTagFiltering(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml"})
	const topic, group = "E2E_Tags", "G_Tags"
	p := newProducer(t, k.Namesrv, "tags-producer")

	got := newReceived()
	var tagsSeen sync.Map
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: group, instance: "tags-consumer", topic: topic,
		selector: consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA"}},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				tagsSeen.Store(string(m.Body), m.GetTags())
			}
			return got.handler(ctx, msgs...)
		})

	var wantA, sentB []string
	for i := 0; i < 50; i++ {
		wantA = append(wantA, sendN(t, p, topic, "tagA", "TagA", i, 1)...)
		sentB = append(sentB, sendN(t, p, topic, "tagB", "TagB", i, 1)...)
	}
	// A last TagA message: once it and every other TagA message arrived, any
	// TagB message sent before it would have arrived too.
	wantA = append(wantA, sendN(t, p, topic, "tagA-last", "TagA", 0, 1)...)

	if err := waitFor(30*time.Second, func() bool { return got.hasAll(wantA) }); err != nil {
		t.Fatalf("TagA messages missing within 30s: %s", abbrev(got.missing(wantA)))
	}
	if u := got.unexpected(wantA); len(u) > 0 {
		t.Errorf("consumer subscribed to TagA received: %s", abbrev(u))
	}
	for _, b := range wantA {
		if tag, _ := tagsSeen.Load(b); tag != "TagA" {
			t.Errorf("message %s arrived with tag %q, want TagA", b, tag)
		}
	}
	pulled, err := k.metric("keel_pull_messages_total")
	if err != nil {
		t.Fatalf("reading keel_pull_messages_total: %v", err)
	}
	t.Logf("keel_pull_messages_total = %v for %d TagA and %d TagB messages", pulled, len(wantA), len(sentB))
	if total := len(wantA) + len(sentB); pulled >= float64(total) {
		t.Errorf("keel_pull_messages_total = %v after %d TagA and %d TagB messages: the broker shipped TagB messages "+
			"to a TagA subscriber (the client dropped them itself)", pulled, len(wantA), len(sentB))
	}
}

// TestLargeCompressedBodies: bodies over the client's 4 KiB compression
// threshold (compressible and not) arrive byte for byte.
func TestLargeCompressedBodies(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml"})
	const topic, group = "E2E_Big", "G_Big"
	p := newProducer(t, k.Namesrv, "big-producer")

	rng := rand.New(rand.NewSource(1))
	sizes := []int{4095, 4096, 4097, 5000, 10 << 10, 64 << 10, 300 << 10, 1 << 20}
	want := map[string][]byte{} // key -> body
	var keys []string
	for i, size := range sizes {
		for _, random := range []bool{false, true} {
			body := make([]byte, size)
			if random {
				rng.Read(body)
			} else {
				copy(body, bytes.Repeat([]byte(fmt.Sprintf("keel body %d of %d bytes; ", i, size)), size/20+1))
			}
			key := fmt.Sprintf("big-%d-%v", size, random)
			m := primitive.NewMessage(topic, body)
			m.WithKeys([]string{key})
			res, err := sendSync(p, m)
			if err != nil {
				t.Fatalf("SendSync %s: %v", key, err)
			}
			if res.Status != primitive.SendOK {
				t.Fatalf("SendSync %s: status %d, want SEND_OK", key, res.Status)
			}
			want[key] = body
			keys = append(keys, key)
		}
	}

	var mu sync.Mutex
	gotBodies := map[string][]byte{}
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: group, instance: "big-consumer", topic: topic},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				gotBodies[m.GetKeys()] = append([]byte(nil), m.Body...)
			}
			return consumer.ConsumeSuccess, nil
		})
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, key := range keys {
			if _, ok := gotBodies[key]; !ok {
				out = append(out, key)
			}
		}
		return out
	}
	if err := waitFor(30*time.Second, func() bool { return len(missing()) == 0 }); err != nil {
		t.Fatalf("large messages missing within 30s: %s", strings.Join(missing(), " "))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, key := range keys {
		if g := gotBodies[key]; !bytes.Equal(g, want[key]) {
			t.Errorf("%s: received %d bytes, sent %d; bodies differ", key, len(g), len(want[key]))
		}
	}
}

// TestRetryLaterRedelivers: a callback that returns ConsumeRetryLater for
// one message gets it again (through %RETRY%group) with ReconsumeTimes 1
// and its original topic, body and keys; the others arrive once.
func TestRetryLaterRedelivers(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml"})
	const topic, group = "E2E_Retry", "G_Retry"
	const failing = "retry-000003"
	p := newProducer(t, k.Namesrv, "retry-producer")

	type delivery struct {
		topic, keys    string
		reconsumeTimes int32
	}
	var mu sync.Mutex
	deliveries := map[string][]delivery{}
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: group, instance: "retry-consumer", topic: topic},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				b := string(m.Body)
				deliveries[b] = append(deliveries[b], delivery{m.Topic, m.GetKeys(), m.ReconsumeTimes})
				if b == failing && len(deliveries[b]) == 1 {
					result = consumer.ConsumeRetryLater
				}
			}
			return result, nil
		})
	bodies := sendN(t, p, topic, "retry", "", 0, 10)

	count := func(b string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(deliveries[b])
	}
	// RocketMQ would delay the retry by delay level 3 (10 s); allow for it.
	if err := waitFor(40*time.Second, func() bool { return count(failing) >= 2 }); err != nil {
		t.Fatalf("message %s, failed once with ConsumeRetryLater, was delivered %d time(s) within 40s; want a redelivery",
			failing, count(failing))
	}
	if err := waitFor(10*time.Second, func() bool {
		for _, b := range bodies {
			if count(b) == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("not every message arrived")
	}
	mu.Lock()
	defer mu.Unlock()
	d := deliveries[failing]
	if d[0].reconsumeTimes != 0 {
		t.Errorf("first delivery of %s has ReconsumeTimes %d, want 0", failing, d[0].reconsumeTimes)
	}
	if d[1].reconsumeTimes != 1 || d[1].topic != topic || d[1].keys != failing {
		t.Errorf("redelivery of %s: ReconsumeTimes %d topic %q keys %q; want 1 %q %q",
			failing, d[1].reconsumeTimes, d[1].topic, d[1].keys, topic, failing)
	}
	if len(d) > 2 {
		t.Errorf("%s delivered %d times; it failed only once", failing, len(d))
	}
	for _, b := range bodies {
		if b != failing && len(deliveries[b]) != 1 {
			t.Errorf("%s delivered %d times, want once", b, len(deliveries[b]))
		}
	}
}
