package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// sender is the part of the client's producer the tests use.
type sender interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
	Shutdown() error
}

// pushConsumer is the part of the client's push consumer the tests use.
type pushConsumer interface {
	Subscribe(topic string, selector consumer.MessageSelector,
		f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) error
	Start() error
	Shutdown() error
}

// newProducer starts a producer whose client instance is named instance
// (distinct names give distinct client objects inside the library), with
// extra options after the tests' own.
func newProducer(t *testing.T, namesrv, instance string, extra ...producer.Option) sender {
	t.Helper()
	opts := append([]producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
		producer.WithGroupName("PG_" + instance),
		producer.WithInstanceName(instance),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5 * time.Second),
	}, extra...)
	p, err := producer.NewDefaultProducer(opts...)
	if err != nil {
		t.Fatalf("NewDefaultProducer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("producer Start: %v", err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { p.Shutdown() }) })
	return &onceShutdown{sender: p, once: &once}
}

type onceShutdown struct {
	sender
	once *sync.Once
}

func (o *onceShutdown) Shutdown() error {
	var err error
	o.once.Do(func() { err = o.sender.Shutdown() })
	return err
}

// consumerConfig describes a clustering push consumer.
type consumerConfig struct {
	namesrv, group, instance, topic string
	selector                        consumer.MessageSelector // zero value: all tags
	extra                           []consumer.Option
}

// startConsumer subscribes to cfg.topic with handler, starts the consumer
// and registers its shutdown with the test (Shutdown may be called earlier
// by the test itself; it is idempotent inside the client).
func startConsumer(t *testing.T, cfg consumerConfig,
	handler func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) pushConsumer {
	t.Helper()
	opts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{cfg.namesrv})),
		consumer.WithGroupName(cfg.group),
		consumer.WithInstance(cfg.instance),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	opts = append(opts, cfg.extra...)
	c, err := consumer.NewPushConsumer(opts...)
	if err != nil {
		t.Fatalf("NewPushConsumer: %v", err)
	}
	sel := cfg.selector
	if sel.Expression == "" {
		sel = consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}
	}
	if err := c.Subscribe(cfg.topic, sel, handler); err != nil {
		t.Fatalf("Subscribe %s: %v", cfg.topic, err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("consumer Start (group %s): %v", cfg.group, err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return c
}

// received records what a consumer got, by message body.
type received struct {
	mu     sync.Mutex
	counts map[string]int
	msgs   map[string]*primitive.MessageExt // first delivery of each body
	total  int
}

func newReceived() *received {
	return &received{counts: map[string]int{}, msgs: map[string]*primitive.MessageExt{}}
}

func (r *received) add(m *primitive.MessageExt) {
	b := string(m.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[b]++
	r.total++
	if _, ok := r.msgs[b]; !ok {
		r.msgs[b] = m
	}
}

// handler is a consume callback that records every message and succeeds.
func (r *received) handler(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	for _, m := range msgs {
		r.add(m)
	}
	return consumer.ConsumeSuccess, nil
}

func (r *received) has(body string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[body] > 0
}

func (r *received) count(body string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[body]
}

func (r *received) first(body string) *primitive.MessageExt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs[body]
}

// distinct returns how many different bodies arrived and how many
// deliveries there were in all.
func (r *received) distinct() (distinct, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.counts), r.total
}

// missing returns the bodies of want that have not arrived, sorted.
func (r *received) missing(want []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range want {
		if r.counts[b] == 0 {
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return out
}

// hasAll reports whether every body in want has arrived.
func (r *received) hasAll(want []string) bool { return len(r.missing(want)) == 0 }

// unexpected returns arrived bodies that are not in want, sorted.
func (r *received) unexpected(want []string) []string {
	set := make(map[string]bool, len(want))
	for _, b := range want {
		set[b] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for b := range r.counts {
		if !set[b] {
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return out
}

// duplicates returns the bodies delivered more than once, sorted.
func (r *received) duplicates() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for b, n := range r.counts {
		if n > 1 {
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return out
}

// sendN sends n messages to topic with bodies prefix-000000.. (keys equal to
// the bodies, tag if not empty) and fails the test unless every one is
// SEND_OK. It returns the bodies.
func sendN(t *testing.T, p sender, topic, prefix, tag string, from, n int) []string {
	t.Helper()
	bodies := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		body := fmt.Sprintf("%s-%06d", prefix, i)
		m := primitive.NewMessage(topic, []byte(body))
		m.WithKeys([]string{body})
		if tag != "" {
			m.WithTag(tag)
		}
		res, err := sendSync(p, m)
		if err != nil {
			t.Fatalf("SendSync %s to %s: %v", body, topic, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("SendSync %s to %s: status %d, want SEND_OK (%v)", body, topic, res.Status, res)
		}
		bodies = append(bodies, body)
	}
	return bodies
}

func sendSync(p sender, m *primitive.Message) (*primitive.SendResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return p.SendSync(ctx, m)
}

// abbrev shortens a list for a failure message.
func abbrev(s []string) string {
	if len(s) > 10 {
		return fmt.Sprintf("%s ... (%d in all)", strings.Join(s[:10], " "), len(s))
	}
	return strings.Join(s, " ")
}

// logClientOnFailure prints the client's warnings and errors logged since
// the test started if it fails.
func logClientOnFailure(t *testing.T) {
	t0 := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rocketmq-client-go warnings and errors since the test started (all tests of the process):\n%s",
				strings.Join(clientLog.since(t0), "\n"))
		}
	})
}
