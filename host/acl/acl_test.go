package acl

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/netip"
	"strings"
	"testing"

	"github.com/keelmq/keel/host/remoting"
)

func TestParsePerm(t *testing.T) {
	for in, want := range map[string]Perm{
		"": Deny, "DENY": Deny, "PUB": Pub, "sub": Sub, "PUB|SUB": Pub | Sub, "SUB | PUB": Pub | Sub,
	} {
		got, err := ParsePerm(in)
		if err != nil || got != want {
			t.Errorf("ParsePerm(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"ANY", "PUB|", "DENY|PUB", "pubsub", "READ"} {
		if _, err := ParsePerm(in); err == nil {
			t.Errorf("ParsePerm(%q) accepted", in)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	cases := []struct {
		pattern string
		yes, no []string
	}{
		{"", nil, []string{"127.0.0.1", "::1"}},
		{"*", []string{"127.0.0.1", "::1", "10.9.8.7"}, nil},
		{"*.*.*.*", []string{"1.2.3.4"}, nil},
		{"192.168.0.1", []string{"192.168.0.1", "::ffff:192.168.0.1"}, []string{"192.168.0.2"}},
		{"192.168.*", []string{"192.168.0.1", "192.168.255.255"}, []string{"192.169.0.1"}},
		{"192.168.1.*", []string{"192.168.1.9"}, []string{"192.168.2.9"}},
		{"192.168.1.1-100", []string{"192.168.1.1", "192.168.1.100"}, []string{"192.168.1.0", "192.168.1.101"}},
		{"192.168.1.{1,5,9}", []string{"192.168.1.5", "192.168.1.9"}, []string{"192.168.1.2"}},
		{"10.0.0.1,10.0.0.2", []string{"10.0.0.2"}, []string{"10.0.0.3"}},
		{"10.0.0.{1,2},::1", []string{"10.0.0.1", "::1"}, []string{"::2", "10.0.0.3"}},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", c.pattern, err)
		}
		for _, a := range c.yes {
			if !p.Match(netip.MustParseAddr(a)) {
				t.Errorf("%q does not match %s", c.pattern, a)
			}
		}
		for _, a := range c.no {
			if p.Match(netip.MustParseAddr(a)) {
				t.Errorf("%q matches %s", c.pattern, a)
			}
		}
	}
	for _, bad := range []string{"10.0.0", "10.*.3", "1.2.3.4.5", "1.2.3.256", "1.2.3.9-1", "1.2.3.{1,2", "fe80::*", "10.0.0.1,", "1.2.3.01", "a.b.c.d"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), bad) {
			t.Errorf("ParsePattern(%q): error %q does not quote the pattern", bad, err)
		}
	}
}

// TestSignMatchesRocketMQ: the signature is HMAC-SHA1 over the header
// values in key order (Signature left out) and the body, in standard
// Base64, computed here by hand for a SEND_MESSAGE_V2 header.
func TestSignMatchesRocketMQ(t *testing.T) {
	cmd := &remoting.Command{Code: remoting.CodeSendMessageV2, Body: []byte("hello")}
	cmd.SetExt("b", "TopicA")
	cmd.SetExt("a", "PG")
	cmd.SetExt(FieldAccessKey, "rocketmq2")
	cmd.SetExt(FieldSignature, "ignored")
	mac := hmac.New(sha1.New, []byte("12345678"))
	mac.Write([]byte("rocketmq2" + "PG" + "TopicA" + "hello")) // AccessKey < a < b
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if got := Sign(cmd, "12345678", true); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

// policyFor builds the Policy of one account "producer1" (and an admin
// "superuser") for the Check tests.
func policyFor(t testing.TB, mutate func(*Config)) *Policy {
	t.Helper()
	c := Config{
		Enabled: true,
		Accounts: map[string]AccountConfig{
			"producer1": {
				SecretKey:        "secret-p1",
				DefaultTopicPerm: "DENY",
				DefaultGroupPerm: "SUB",
				TopicPerms:       map[string]string{"Orders": "PUB", "Audit": "PUB|SUB", "Closed": "DENY"},
				GroupPerms:       map[string]string{"Blocked": "DENY"},
			},
			"superuser": {SecretKey: "secret-su", Admin: true},
		},
	}
	if mutate != nil {
		mutate(&c)
	}
	p, err := New(c)
	if err != nil || p == nil {
		t.Fatalf("New: %v, %v", p, err)
	}
	return p
}

// signed builds a request signed as ak with secret.
func signed(code int16, ak, secret string, fields map[string]string, body []byte) *remoting.Command {
	cmd := &remoting.Command{Code: code, Body: body}
	for k, v := range fields {
		cmd.SetExt(k, v)
	}
	if ak != "" {
		cmd.SetExt(FieldAccessKey, ak)
		cmd.SetExt(FieldSignature, Sign(cmd, secret, true))
	}
	return cmd
}

var local = netip.MustParseAddr("127.0.0.1")

func TestCheck(t *testing.T) {
	p := policyFor(t, nil)
	send := func(topic string) map[string]string { return map[string]string{"a": "PG", "b": topic} }
	pull := func(group, topic string) map[string]string {
		return map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0"}
	}
	hb := []byte(`{"clientID":"c1","consumerDataSet":[{"groupName":"G1","subscriptionDataSet":[{"topic":"Audit"},{"topic":"%RETRY%G1"}]}]}`)
	cases := []struct {
		name string
		cmd  *remoting.Command
		want string // "" = allowed; else a substring of the refusal
	}{
		{"publish allowed", signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", send("Orders"), []byte("x")), ""},
		{"publish v1 allowed", signed(remoting.CodeSendMessage, "producer1", "secret-p1", map[string]string{"producerGroup": "PG", "topic": "Orders"}, nil), ""},
		{"publish by default denied", signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", send("Other"), nil), `publish to topic "Other"`},
		{"explicit deny", signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", send("Closed"), nil), `"Closed"`},
		{"trace topic always", signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", send(TraceTopic), nil), ""},
		{"retry topic needs the group", signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", send("%RETRY%Blocked"), nil), `group "Blocked"`},
		{"no access key", signed(remoting.CodeSendMessageV2, "", "", send("Orders"), nil), "has no AccessKey"},
		{"unknown access key", signed(remoting.CodeSendMessageV2, "nobody12", "whatever", send("Orders"), nil), `no account has AccessKey "nobody12"`},
		{"wrong secret", signed(remoting.CodeSendMessageV2, "producer1", "not-the-secret", send("Orders"), nil), "signature does not match"},
		{"pull needs SUB on topic", signed(remoting.CodePullMessage, "producer1", "secret-p1", pull("G1", "Orders"), nil), `subscribe to topic "Orders"`},
		{"pull allowed", signed(remoting.CodePullMessage, "producer1", "secret-p1", pull("G1", "Audit"), nil), ""},
		{"pull as a denied group", signed(remoting.CodePullMessage, "producer1", "secret-p1", pull("Blocked", "Audit"), nil), `group "Blocked"`},
		{"pull header incomplete", signed(remoting.CodePullMessage, "producer1", "secret-p1", map[string]string{"topic": "Audit"}, nil), "consumerGroup is missing"},
		{"heartbeat allowed", signed(remoting.CodeHeartBeat, "producer1", "secret-p1", nil, hb), ""},
		{"heartbeat subscribing a denied topic", signed(remoting.CodeHeartBeat, "producer1", "secret-p1", nil,
			[]byte(`{"clientID":"c1","consumerDataSet":[{"groupName":"G1","subscriptionDataSet":[{"topic":"Orders"}]}]}`)), `subscribe to topic "Orders"`},
		{"offset update", signed(remoting.CodeUpdateConsumerOffset, "producer1", "secret-p1", map[string]string{"consumerGroup": "G1", "topic": "Audit"}, nil), ""},
		{"send back as a denied group", signed(remoting.CodeConsumerSendMsgBack, "producer1", "secret-p1", map[string]string{"group": "Blocked"}, nil), `"Blocked"`},
		{"signature only", signed(remoting.CodeGetMaxOffset, "producer1", "secret-p1", map[string]string{"topic": "Anything"}, nil), ""},
		{"admin code, not admin", signed(remoting.CodeUpdateAndCreateTopic, "producer1", "secret-p1", map[string]string{"topic": "T"}, nil), "needs an admin account"},
		{"admin code, admin", signed(remoting.CodeDeleteTopicInBroker, "superuser", "secret-su", map[string]string{"topic": "T"}, nil), ""},
		{"admin without perms may all", signed(remoting.CodeSendMessageV2, "superuser", "secret-su", send("Other"), nil), ""},
	}
	for _, c := range cases {
		err := p.Check(local, c.cmd)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: allowed, want refused (%s)", c.name, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: refused with %q, want it to say %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-") {
			t.Errorf("%s: refusal shows a secret: %v", c.name, err)
		}
	}
}

// TestCheckTamperedRequest: a signed request whose body or header field
// changed on the way is refused.
func TestCheckTamperedRequest(t *testing.T) {
	p := policyFor(t, nil)
	cmd := signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", map[string]string{"a": "PG", "b": "Orders"}, []byte("body"))
	if err := p.Check(local, cmd); err != nil {
		t.Fatalf("untampered: %v", err)
	}
	cmd.Body = []byte("BODY")
	if err := p.Check(local, cmd); err == nil {
		t.Fatal("tampered body accepted")
	}
	cmd.Body = []byte("body")
	cmd.SetExt("b", "Audit")
	if err := p.Check(local, cmd); err == nil {
		t.Fatal("tampered topic accepted")
	}
}

// TestCheckSecurityToken: a token is accepted signed (the Java client) and
// unsigned (rocketmq-client-go sends it without signing it).
func TestCheckSecurityToken(t *testing.T) {
	p := policyFor(t, nil)
	fields := map[string]string{"a": "PG", "b": "Orders"}
	javaStyle := signed(remoting.CodeSendMessageV2, "", "", fields, nil)
	javaStyle.SetExt(FieldAccessKey, "producer1")
	javaStyle.SetExt(FieldSecurityToken, "tok")
	javaStyle.SetExt(FieldSignature, Sign(javaStyle, "secret-p1", true))
	goStyle := signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", fields, nil)
	goStyle.SetExt(FieldSecurityToken, "tok")
	for name, cmd := range map[string]*remoting.Command{"signed token": javaStyle, "unsigned token": goStyle} {
		if err := p.Check(local, cmd); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckWhiteLists(t *testing.T) {
	p := policyFor(t, func(c *Config) {
		c.GlobalWhiteRemoteAddresses = []string{"10.0.0.*"}
		a := c.Accounts["producer1"]
		a.WhiteRemoteAddress = "192.168.1.{1,2}"
		c.Accounts["producer1"] = a
	})
	unsigned := &remoting.Command{Code: remoting.CodeSendMessageV2}
	unsigned.SetExt("b", "Closed")
	if err := p.Check(netip.MustParseAddr("10.0.0.7"), unsigned); err != nil {
		t.Errorf("global white list: %v", err)
	}
	if err := p.Check(netip.MustParseAddr("10.0.1.7"), unsigned); err == nil {
		t.Error("outside the global white list: allowed unsigned")
	}
	keyOnly := &remoting.Command{Code: remoting.CodeSendMessageV2}
	keyOnly.SetExt("b", "Closed")
	keyOnly.SetExt(FieldAccessKey, "producer1")
	if err := p.Check(netip.MustParseAddr("192.168.1.2"), keyOnly); err != nil {
		t.Errorf("account white list: %v", err)
	}
	if err := p.Check(netip.MustParseAddr("192.168.1.3"), keyOnly); err == nil {
		t.Error("outside the account white list: allowed unsigned")
	}
}

func TestProblems(t *testing.T) {
	c := Config{
		Enabled:                    true,
		GlobalWhiteRemoteAddresses: []string{"10.0.0.*", "10.0"},
		Accounts: map[string]AccountConfig{
			"short":      {SecretKey: "12345678"},
			"longenough": {SecretKey: "123", DefaultTopicPerm: "READ", WhiteRemoteAddress: "1.2.3.999", TopicPerms: map[string]string{"T": "ANY"}},
		},
	}
	got := map[string]string{}
	for _, pr := range c.Problems() {
		got[strings.Join(pr.Key, ".")] = pr.Msg
	}
	for _, key := range []string{
		"global_white_remote_addresses", "accounts.short", "accounts.longenough.secret_key",
		"accounts.longenough.default_topic_perm", "accounts.longenough.white_remote_address", "accounts.longenough.topic_perms.T",
	} {
		if _, ok := got[key]; !ok {
			t.Errorf("no problem reported at %s (got %v)", key, got)
		}
	}
	if len(got) != 6 {
		t.Errorf("want 6 problems, got %v", got)
	}
	if _, err := New(c); err == nil {
		t.Error("New accepted a config with problems")
	}
	if p, err := New(Config{Accounts: c.Accounts}); err == nil || p != nil {
		t.Errorf("New of a disabled config with bad accounts: %v, %v (want the problem reported)", p, err)
	}
	if p, err := New(Config{}); err != nil || p != nil {
		t.Errorf("New(disabled) = %v, %v; want nil, nil", p, err)
	}
	empty := Config{Enabled: true}
	if ps := empty.Problems(); len(ps) != 1 || ps[0].Key[0] != "enabled" {
		t.Errorf("enabled with no accounts: %v", ps)
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"", "*", "*.*.*.*", "10.0.0.1", "10.0.*", "10.0.0.1-200", "10.0.0.{1,2}", "::1", "1.2.3.4,::1", "{", "1.2.3.{", "1-2-3", "1..2.3"} {
		f.Add(s, "10.0.0.1")
	}
	f.Fuzz(func(t *testing.T, pattern, addr string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			return
		}
		if p.String() != pattern {
			t.Fatalf("String() = %q, want %q", p.String(), pattern)
		}
		if a, err := netip.ParseAddr(addr); err == nil {
			p.Match(a)
			if strings.TrimSpace(pattern) == "*" && !p.Match(a) {
				t.Fatalf("* does not match %s", a)
			}
			if exact, err := netip.ParseAddr(strings.TrimSpace(pattern)); err == nil && p.Match(a) != (exact.Unmap() == a.Unmap()) {
				t.Fatalf("exact pattern %q and %s: Match %v", pattern, a, p.Match(a))
			}
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	p, err := New(Config{Enabled: true, Accounts: map[string]AccountConfig{
		"producer1": {SecretKey: "secret-p1", TopicPerms: map[string]string{"Orders": "PUB"}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	cmd := signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", map[string]string{
		"a": "PG", "b": "Orders", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0",
		"i": "UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false",
	}, make([]byte, 128))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Check(local, cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCheck decodes arbitrary frames and asks a policy about them: Check
// never panics, and a request it lets through (no white list here) always
// carries an account's valid signature.
func FuzzCheck(f *testing.F) {
	p := policyFor(f, nil)
	for _, cmd := range []*remoting.Command{
		signed(remoting.CodeSendMessageV2, "producer1", "secret-p1", map[string]string{"a": "PG", "b": "Orders"}, []byte("x")),
		signed(remoting.CodeHeartBeat, "producer1", "secret-p1", nil, []byte(`{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"Audit"}]}]}`)),
		signed(remoting.CodePullMessage, "producer1", "secret-p1", map[string]string{"consumerGroup": "G", "topic": "Audit"}, nil),
		signed(remoting.CodeUpdateAndCreateTopic, "superuser", "secret-su", map[string]string{"topic": "T"}, nil),
		{Code: remoting.CodeSendMessage},
	} {
		f.Add(cmd.AppendFrame(nil))
	}
	secrets := map[string]string{"producer1": "secret-p1", "superuser": "secret-su"}
	f.Fuzz(func(t *testing.T, frame []byte) {
		cmd, err := remoting.ReadCommand(bufio.NewReader(bytes.NewReader(frame)), 1<<20)
		if err != nil {
			return
		}
		if p.Check(local, cmd) != nil {
			return
		}
		secret, ok := secrets[cmd.Ext(FieldAccessKey)]
		if !ok || !newSigner(secret).valid(cmd) {
			t.Fatalf("allowed a request not signed by an account: code %d, fields %v", cmd.Code, cmd.ExtFields.Map())
		}
	})
}
