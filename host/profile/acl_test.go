package profile

import (
	"strings"
	"testing"
)

const aclDoc = `schema = 1

[acl]
enabled = true
global_white_remote_addresses = ["10.0.0.*"]

[acl.accounts.producer1]
secret_key = "hunter2-p1"
default_topic_perm = "DENY"
default_group_perm = "SUB"
topic_perms = { Orders = "PUB", "%weird.name" = "PUB|SUB" }

[acl.accounts.superuser]
secret_key = "hunter2-su"
admin = true
`

func TestACLSection(t *testing.T) {
	p := mustLoad(t, aclDoc)
	if !p.ACL.Enabled || len(p.ACL.Accounts) != 2 || p.ACL.GlobalWhiteRemoteAddresses[0] != "10.0.0.*" {
		t.Fatalf("acl section: %+v", p.ACL)
	}
	a := p.ACL.Accounts["producer1"]
	if a.SecretKey != "hunter2-p1" || a.TopicPerms["Orders"] != "PUB" || a.TopicPerms["%weird.name"] != "PUB|SUB" || !p.ACL.Accounts["superuser"].Admin {
		t.Fatalf("account: %+v", a)
	}

	red, err := p.EffectiveRedacted()
	if err != nil || strings.Contains(string(red), "hunter2") || strings.Count(string(red), "secret_key = '(redacted)'") != 2 {
		t.Errorf("redacted (err %v):\n%s", err, red)
	}
	out, err := p.Effective()
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadBytes("profiles/x.toml", out, nil)
	if err != nil {
		t.Fatalf("effective profile does not load back: %v\n%s", err, out)
	}
	if back.ACL.Accounts["producer1"].TopicPerms["%weird.name"] != "PUB|SUB" || back.ACL.Accounts["superuser"].SecretKey != "hunter2-su" {
		t.Errorf("effective profile loads back as %+v", back.ACL)
	}

	// --set reaches an account's key.
	p = mustLoad(t, aclDoc, `acl.accounts.producer1.topic_perms.Orders=SUB`)
	if got := p.ACL.Accounts["producer1"].TopicPerms["Orders"]; got != "SUB" {
		t.Errorf("--set topic perm: %q", got)
	}
}

func TestACLErrors(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		overrides []string
		want      string
	}{
		{"bad permission", aclDoc + "default_topic_perm = \"READ\"\n", nil,
			`profiles/x.toml:16:22: acl.accounts.superuser.default_topic_perm: "READ" is not a permission (want "DENY", "PUB", "SUB" or "PUB|SUB")`},
		{"short secret", strings.Replace(aclDoc, `"hunter2-p1"`, `"abc"`, 1), nil,
			"profiles/x.toml:8:14: acl.accounts.producer1.secret_key: must be at least 7 characters"},
		{"bad pattern", strings.Replace(aclDoc, `"10.0.0.*"`, `"10.0"`, 1), nil,
			`profiles/x.toml:5:1: acl.global_white_remote_addresses: entry 1: "10.0" has fewer than four bytes and does not end in "*" (want "*", an address`},
		{"bad perm by --set", aclDoc, []string{"acl.accounts.producer1.topic_perms.Orders=ALL"},
			`profiles/x.toml: --set acl.accounts.producer1.topic_perms.Orders=ALL: acl.accounts.producer1.topic_perms.Orders: "ALL" is not a permission`},
		{"enabled, no account", "schema = 1\n[acl]\nenabled = true\n", nil,
			"profiles/x.toml:3:11: acl.enabled: is true with no accounts and no white list, which refuses every request"},
		{"unknown account key", aclDoc + "secret = \"x\"\n", nil,
			"profiles/x.toml:16:1: acl.accounts.superuser.secret: unknown key; allowed in [acl.accounts.superuser]: secret_key, white_remote_address"},
	} {
		_, err := LoadBytes("profiles/x.toml", []byte(c.doc), c.overrides)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v\nwant it to contain %s", c.name, err, c.want)
		}
	}
}

func TestIsSecretKeyACL(t *testing.T) {
	for key, want := range map[string]bool{
		"acl.accounts.producer1.secret_key": true,
		`acl.accounts."a.b".secret_key`:     true,
		"acl.accounts.producer1":            true, // an inline table may hold the secret
		"acl.accounts":                      true,
		"acl":                               true,
		"replication":                       true,
		"replication.secret":                true,
		"acl.accounts.producer1.admin":      false,
		"acl.enabled":                       false,
		"replication.plugin":                false,
		"store.segment_size":                false,
	} {
		if got := IsSecretKey(key); got != want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}
