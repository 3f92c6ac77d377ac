package profile

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/keelmq/keel/sdk/config"
	"github.com/pelletier/go-toml/v2"
)

// Effective returns the profile as TOML with every default filled in, in a
// form Load reads back to an equal profile: what `keel profile check` prints.
// A plugin section's config is the value last decoded by DecodePluginConfig
// (with the plugin's defaults) when there is one, else the table as written.
// The output includes replication.secret; see EffectiveRedacted.
func (p *Profile) Effective() ([]byte, error) {
	return p.effective(false)
}

// secretKeys are the profile keys whose values are secrets. This list is
// the one place that says so: EffectiveRedacted redacts them, and
// IsSecretKey tells everything else that shows profile values (the admin
// API's /debug/pprof/cmdline, which shows `--set key=value`).
var secretKeys = []string{"replication.secret"}

// IsSecretKey reports whether the dotted profile key (as given to --set,
// "replication.secret", or with TOML quoting as `replication."secret"`)
// holds a secret whose value must never be shown: whether it is one of
// secretKeys. A key that does not parse is treated as a secret.
func IsSecretKey(dotted string) bool {
	path, err := config.ParseKey(strings.TrimSpace(dotted))
	if err != nil {
		return true
	}
	k := strings.Join(path, ".")
	for _, s := range secretKeys {
		if k == s {
			return true
		}
	}
	return false
}

// EffectiveRedacted is Effective with the secret keys (secretKeys)
// replaced by "(redacted)" when set, for printing.
func (p *Profile) EffectiveRedacted() ([]byte, error) {
	return p.effective(true)
}

func (p *Profile) effective(redact bool) ([]byte, error) {
	doc := document{
		Schema: p.Schema, Store: p.Store, Flush: p.Flush, Replication: p.Replication,
		Index: p.Index, Server: p.Server, Controller: p.Controller, Admin: p.Admin,
	}
	// secretKeys: replication.secret is the one secret field.
	if redact && doc.Replication.Secret != "" {
		doc.Replication.Secret = "(redacted)"
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
