package config

import (
	"strings"
	"testing"
)

// TestValueError: a value a plugin rejects after decoding is reported where
// the value in force came from: the document's value, the --set override
// that set it, or nowhere (a default).
func TestValueError(t *testing.T) {
	const file = "p.toml"
	doc := []byte("[replication.config]\nwait_replicas = 9\nretry = { backoff = \"1s\" }\n")
	over := func(args ...string) []byte {
		var ovs []Override
		for _, a := range args {
			k, v, _ := strings.Cut(a, "=")
			ovs = append(ovs, Override{Arg: a, Doc: []byte(k + " = " + v + "\n")})
		}
		return WithOverrides(doc, ovs)
	}
	for _, tc := range []struct {
		name string
		doc  []byte
		key  string
		want string
	}{
		{"the document's value", doc, "wait_replicas",
			"p.toml:2:17: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
		{"inside an inline table", doc, "retry.backoff",
			"p.toml:3:21: replication.config.retry.backoff: 9 is not allowed: want 1 to 3"},
		{"a default", doc, "timeout",
			"p.toml: replication.config.timeout: 9 is not allowed: want 1 to 3"},
		{"an override of the key", over("replication.config.wait_replicas=9"), "wait_replicas",
			"p.toml: --set replication.config.wait_replicas=9: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
		{"the last override wins", over("replication.config.wait_replicas=9", "replication.config.wait_replicas=8"), "wait_replicas",
			"p.toml: --set replication.config.wait_replicas=8: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
		{"an override of another key", over("replication.config.timeout=\"1s\""), "wait_replicas",
			"p.toml:2:17: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
		{"an override of the whole table that sets it", over("replication.config={wait_replicas=9}"), "wait_replicas",
			"p.toml: --set replication.config={wait_replicas=9}: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
		{"an override of the whole table that does not", over("replication.config={timeout=\"1s\"}"), "wait_replicas",
			"p.toml: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
		{"an override above the table", over("replication={config={wait_replicas=9}}"), "wait_replicas",
			"p.toml: --set replication={config={wait_replicas=9}}: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
		{"an override before a whole-table one", over("replication.config.wait_replicas=9", "replication.config={timeout=\"1s\"}"), "wait_replicas",
			"p.toml: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
		{"an unparsable document", []byte("[replication.config\n"), "wait_replicas",
			"p.toml: replication.config.wait_replicas: 9 is not allowed: want 1 to 3"},
	} {
		got := ValueError(file, tc.doc, "replication", tc.key, "%d is not allowed: want 1 to %d", 9, 3)
		if got.Error() != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
