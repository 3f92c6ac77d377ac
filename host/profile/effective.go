package profile

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/keelmq/keel/host/acl"
	"github.com/keelmq/keel/sdk/config"
	"github.com/pelletier/go-toml/v2"
)

// Effective returns the profile as TOML with every default filled in, in a
// form Load reads back to an equal profile: what `keel profile check` prints.
// A plugin section's config is the value last decoded by DecodePluginConfig
// (with the plugin's defaults) when there is one, else the table as written.
// The output includes the secrets (secretKeys); see EffectiveRedacted.
func (p *Profile) Effective() ([]byte, error) {
	return p.effective(false)
}

// secretKeys are the profile keys whose values are secrets, "*" standing
// for any one key (an ACL account's access key). This list is the one
// place that says so: EffectiveRedacted redacts them, and IsSecretKey
// tells everything else that shows profile values (the admin API's
// /debug/pprof/cmdline, which shows `--set key=value`).
var secretKeys = [][]string{
	{"replication", "secret"},
	{"acl", "accounts", "*", "secret_key"},
}

// IsSecretKey reports whether the dotted profile key (as given to --set,
// "replication.secret", or with TOML quoting as `replication."secret"`)
// may hold a secret whose value must never be shown: whether it is one of
// secretKeys, below one, or a table that holds one
// (`--set replication={secret="…"}`). A key that does not parse is
// treated as a secret.
func IsSecretKey(dotted string) bool {
	path, err := config.ParseKey(strings.TrimSpace(dotted))
	if err != nil {
		return true
	}
	for _, s := range secretKeys {
		if keyOverlaps(path, s) {
			return true
		}
	}
	return false
}

// keyOverlaps reports whether one of path and pattern is a prefix of the
// other, "*" in pattern matching any key.
func keyOverlaps(path, pattern []string) bool {
	for i := 0; i < len(path) && i < len(pattern); i++ {
		if pattern[i] != "*" && pattern[i] != path[i] {
			return false
		}
	}
	return true
}

// Redacted stands for a secret's value in what is shown.
const Redacted = "(redacted)"

// EffectiveRedacted is Effective with the secret keys (secretKeys)
// replaced by "(redacted)" when set, for printing.
func (p *Profile) EffectiveRedacted() ([]byte, error) {
	return p.effective(true)
}

func (p *Profile) effective(redact bool) ([]byte, error) {
	doc := document{
		Schema: p.Schema, Store: p.Store, Flush: p.Flush, Replication: p.Replication,
		Index: p.Index, Server: p.Server, Controller: p.Controller, Admin: p.Admin, ACL: p.ACL,
	}
	// secretKeys: replication.secret and each account's secret_key.
	if redact {
		if doc.Replication.Secret != "" {
			doc.Replication.Secret = Redacted
		}
		accounts := make(map[string]acl.AccountConfig, len(doc.ACL.Accounts))
		for ak, a := range doc.ACL.Accounts {
			if a.SecretKey != "" {
				a.SecretKey = Redacted
			}
			accounts[ak] = a
		}
		if doc.ACL.Accounts != nil {
			doc.ACL.Accounts = accounts
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for section, dst := range map[string]*map[string]any{
		SectionFlush: &doc.Flush.Config, SectionIndex: &doc.Index.Config, SectionReplication: &doc.Replication.Config,
	} {
		v, ok := p.plugins[section]
		if !ok {
			continue
		}
		m, err := toMap(v)
		if err != nil {
			return nil, fmt.Errorf("writing effective profile: %s.config: %w", section, err)
		}
		*dst = m
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Effective profile %q: every default filled in.\n\n", p.Name)
	if err := toml.NewEncoder(&buf).Encode(doc); err != nil {
		return nil, fmt.Errorf("writing effective profile: %w", err)
	}
	return buf.Bytes(), nil
}

// toMap converts a plugin config value to the generic table the host keeps.
func toMap(v any) (map[string]any, error) {
	b, err := toml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := toml.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}
