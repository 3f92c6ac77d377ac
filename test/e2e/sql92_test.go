package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestSQL92Filter: push consumers with SQL92 selectors (a numeric BETWEEN,
// a string compare with a numeric one, and the TAGS property) each get
// exactly the messages whose properties match, each once.
func TestSQL92Filter(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml"})
	const topic = "E2E_SQL92"
	p := newProducer(t, k.Namesrv, "sql92-producer")

	// Ten rounds of a = 0..9, color red for even a and blue for odd,
	// TagA for a < 5 and TagB otherwise.
	type sent struct {
		body, color, tag string
		a                int
	}
	var all []sent
	for round := range 10 {
		for a := range 10 {
			all = append(all, sent{fmt.Sprintf("sql-r%d-a%d", round, a), []string{"red", "blue"}[a%2], []string{"TagA", "TagB"}[a/5], a})
		}
	}
	cases := []struct {
		group, expr string
		match       func(s sent) bool
	}{
		{"G_SQL_Between", "a BETWEEN 0 AND 3", func(s sent) bool { return s.a <= 3 }},
		{"G_SQL_String", "color = 'red' AND a > 5", func(s sent) bool { return s.color == "red" && s.a > 5 }},
		{"G_SQL_Tags", "TAGS IN ('TagB') AND color <> 'red'", func(s sent) bool { return s.tag == "TagB" && s.color != "red" }},
	}
	got := make([]*received, len(cases))
	for i, tc := range cases {
		got[i] = newReceived()
		startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: tc.group, instance: "sql92-" + tc.group, topic: topic,
			selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: tc.expr}}, got[i].handler)
	}
	for _, s := range all {
		m := primitive.NewMessage(topic, []byte(s.body))
		m.WithTag(s.tag)
		m.WithProperty("a", fmt.Sprint(s.a))
		m.WithProperty("color", s.color)
		res, err := sendSync(p, m)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync %s: %v %v", s.body, res, err)
		}
	}
	// A last message every selector matches: once it arrived, every
	// message sent before it on its queue had its chance.
	for i, tc := range cases {
		last := fmt.Sprintf("sql-last-%d", i)
		m := primitive.NewMessage(topic, []byte(last))
		m.WithTag("TagB")
		m.WithProperty("a", "2")
		m.WithProperty("color", "x")
		if tc.group == "G_SQL_String" {
			m.WithProperty("a", "9")
			m.WithProperty("color", "red")
		}
		if res, err := sendSync(p, m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync %s: %v %v", last, res, err)
		}
	}
	for i, tc := range cases {
		var want []string
		for _, s := range all {
			if tc.match(s) {
				want = append(want, s.body)
			}
		}
		if len(want) == 0 || len(want) == len(all) {
			t.Fatalf("%s: %d of %d messages match; the case does not test filtering", tc.expr, len(want), len(all))
		}
		last := fmt.Sprintf("sql-last-%d", i)
		if err := waitFor(30*time.Second, func() bool { return got[i].hasAll(append(want, last)) }); err != nil {
			t.Errorf("%s: missing within 30s: %s", tc.expr, abbrev(got[i].missing(append(want, last))))
			continue
		}
		var allowed []string
		allowed = append(allowed, want...)
		for j := range cases {
			// The last messages of other cases may match this one too.
			allowed = append(allowed, fmt.Sprintf("sql-last-%d", j))
		}
		if u := got[i].unexpected(allowed); len(u) > 0 {
			t.Errorf("%s: received messages that do not match: %s", tc.expr, abbrev(u))
		}
		if d := got[i].duplicates(); len(d) > 0 {
			t.Errorf("%s: delivered more than once: %s", tc.expr, abbrev(d))
		}
		t.Logf("%s: %d matching of %d sent", tc.expr, len(want), len(all))
	}
}

// TestSQL92BadExpressionFailsVisibly: a consumer whose SQL92 expression
// does not compile starts (rocketmq-client-go checks nothing), but gets no
// message and sees every pull refused with FILTER_DATA_NOT_EXIST (27) and
// the parse error in the remark, and keel logs the expression; a consumer
// of another group on the same topic is unaffected.
func TestSQL92BadExpressionFailsVisibly(t *testing.T) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	k := startKeel(t, keelConfig{profile: "default.toml"})
	const topic = "E2E_SQL92_Bad"
	p := newProducer(t, k.Namesrv, "sql92-bad-producer")
	sendN(t, p, topic, "bad", "", 0, 4)

	t0 := time.Now()
	bad := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: "G_SQL_Bad", instance: "sql92-bad", topic: topic,
		selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: "a BETWEEN 3 AND"}}, bad.handler)
	good := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: "G_SQL_Good", instance: "sql92-good", topic: topic,
		selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: "KEYS IS NOT NULL"}}, good.handler)

	refused := func() []string {
		var out []string
		for _, l := range clientLog.since(t0) {
			if strings.Contains(l, "Response Code: 27") && strings.Contains(l, "G_SQL_Bad") && strings.Contains(l, "a BETWEEN 3 AND") {
				out = append(out, l)
			}
		}
		return out
	}
	if err := waitFor(30*time.Second, func() bool { return len(refused()) > 0 }); err != nil {
		t.Fatalf("no pull of the bad selector's consumer was refused with code 27 within 30s")
	}
	t.Logf("the client logged: %s", refused()[0])
	if lines := k.log.grep("does not compile", "G_SQL_Bad"); len(lines) == 0 {
		t.Error("keel did not log the SQL92 expression that does not compile")
	}
	want := []string{"bad-000000", "bad-000001", "bad-000002", "bad-000003"}
	if err := waitFor(30*time.Second, func() bool { return good.hasAll(want) }); err != nil {
		t.Fatalf("the good selector's consumer is missing: %s", abbrev(good.missing(want)))
	}
	if n, total := bad.distinct(); n != 0 || total != 0 {
		t.Fatalf("the consumer with a bad expression received %d messages", total)
	}
}
