package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestACLWithRealClient runs configs/profiles/acl.toml against
// rocketmq-client-go's own signing (WithCredentials): the producer account
// publishes to Orders and nowhere else, the consumer account consumes
// Orders as OrdersConsumers, and a client without credentials, with a
// wrong secret or with an unknown access key is refused with a remark
// saying why; `keel admin topic create` signed with --access-key works
// for the admin account only. Every refusal is counted in
// keel_remoting_requests_refused_total.
func TestACLWithRealClient(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "acl.toml"})
	creds := func(ak, sk string) producer.Option {
		return producer.WithCredentials(primitive.Credentials{AccessKey: ak, SecretKey: sk})
	}
	p := newProducer(t, k.Namesrv, "acl-producer", creds("orders-producer", "change-me-producer"))
	var bodies []string
	for i := range 20 {
		body := fmt.Sprintf("acl-%03d", i)
		res, err := sendSync(p, primitive.NewMessage("Orders", []byte(body)))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("allowed send %s: %v %v", body, res, err)
		}
		bodies = append(bodies, body)
	}

	refused := func(name string, s sender, topic, want string) {
		t.Helper()
		res, err := sendSync(s, primitive.NewMessage(topic, []byte("refused")))
		if err == nil {
			t.Fatalf("%s: send to %s accepted: %v", name, topic, res)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: send to %s refused with %q, want it to say %q", name, topic, err, want)
		}
	}
	refused("another topic", p, "Payments", `may not publish to topic "Payments"`)
	refused("no credentials", newProducer(t, k.Namesrv, "acl-anon"), "Orders", "has no AccessKey")
	refused("wrong secret", newProducer(t, k.Namesrv, "acl-wrong", creds("orders-producer", "not-the-secret")), "Orders", "signature does not match")
	refused("unknown access key", newProducer(t, k.Namesrv, "acl-unknown", creds("nobody-here", "whatever1")), "Orders", `no account has AccessKey "nobody-here"`)
	refused("consumer account publishing", newProducer(t, k.Namesrv, "acl-cons-pub", creds("orders-consumer", "change-me-consumer")), "Orders", `may not publish to topic "Orders"`)

	got := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: "OrdersConsumers", instance: "acl-consumer", topic: "Orders",
		extra: []consumer.Option{consumer.WithCredentials(primitive.Credentials{AccessKey: "orders-consumer", SecretKey: "change-me-consumer"})}}, got.handler)
	if err := waitFor(30*time.Second, func() bool { return got.hasAll(bodies) }); err != nil {
		t.Fatalf("the consumer account got %d of %d messages; missing %s", len(bodies)-len(got.missing(bodies)), len(bodies), abbrev(got.missing(bodies)))
	}

	// A consumer of a group its account may not use gets nothing.
	other := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: "OtherGroup", instance: "acl-other", topic: "Orders",
		extra: []consumer.Option{consumer.WithCredentials(primitive.Credentials{AccessKey: "orders-consumer", SecretKey: "change-me-consumer"})}}, other.handler)
	time.Sleep(3 * time.Second)
	if d, _ := other.distinct(); d != 0 {
		t.Fatalf("a consumer in a group its account may not use received %d messages", d)
	}

	// keel admin signs with --access-key and $KEEL_SECRET_KEY; only the
	// admin account may create a topic.
	admin := func(ak, sk string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		args := []string{"admin", "topic", "create", "--broker", k.Broker, "--topic", "Created"}
		if ak != "" {
			args = append(args, "--access-key", ak)
		}
		cmd := exec.CommandContext(ctx, keelBin, args...)
		cmd.Env = append(os.Environ(), "KEEL_SECRET_KEY="+sk)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, c := range []struct{ ak, sk, want string }{
		{"", "", "has no AccessKey"},
		{"orders-producer", "change-me-producer", `needs an admin account; AccessKey "orders-producer" is not one`},
		{"keel-admin", "wrong-secret", "signature does not match"},
	} {
		if out, err := admin(c.ak, c.sk); err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("keel admin topic create as %q: %v\n%s\nwant a refusal saying %q", c.ak, err, out, c.want)
		}
	}
	if out, err := admin("keel-admin", "change-me-admin"); err != nil {
		t.Fatalf("keel admin topic create as the admin account: %v\n%s", err, out)
	}

	n, err := k.metric("keel_remoting_requests_refused_total")
	if err != nil || n < 8 {
		t.Fatalf("keel_remoting_requests_refused_total = %v (%v), want at least the 5 refused sends and 3 admin calls", n, err)
	}
}
