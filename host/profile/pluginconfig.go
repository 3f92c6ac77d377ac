package profile

import (
	"fmt"
	"path/filepath"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
)

// PluginConfig returns what the host hands the plugin of section (one of
// SectionFlush, SectionReplication, SectionIndex) in Configure:
//
//   - Name: the section's plugin, or its path for an external binary;
//   - File: the profile's file name (p.File), for error messages;
//   - Document: the profile file as read, with every --set override
//     appended by config.WithOverrides, so sdk.Config.Decode sees the
//     overridden values and reports problems at the file's lines and
//     columns or against the override that caused them, exactly as
//     DecodePluginConfig does (it decodes this same Document);
//   - Section: section;
//   - Role: replication.role, for every section;
//   - for SectionReplication only: Addr = server.ha_addr (the HA listen
//     address), PeerAddr = replication.master_addr (a slave's master), and
//     Secret = replication.secret;
//   - DataDir: filepath.Join(p.Store.Dir, "plugins", section), from
//     Store.Dir as it is at the call (after `keel serve --data`).
//
// PluginConfig does not create DataDir; the host must create it before
// Configure (sdk.Config promises that it exists). Document is a fresh copy
// on each call. An unknown section gets a Config with only File, Document,
// Section, Role and DataDir set. Safe for concurrent use, provided the
// exported fields are not being modified.
func (p *Profile) PluginConfig(section string) sdk.Config {
	ovs := make([]config.Override, len(p.overlays))
	for i, ov := range p.overlays {
		ovs[i] = config.Override{Arg: ov.src.Override(), Doc: ov.doc}
	}
	c := sdk.Config{
		File:     p.File,
		Document: config.WithOverrides(p.data, ovs),
		Section:  section,
		Role:     p.Replication.Role,
		DataDir:  filepath.Join(p.Store.Dir, "plugins", section),
	}
	name := func(plugin, path string) string {
		if plugin != "" {
			return plugin
		}
		return path
	}
	switch section {
	case SectionFlush:
		c.Name = name(p.Flush.Plugin, p.Flush.Path)
	case SectionIndex:
		c.Name = name(p.Index.Plugin, p.Index.Path)
	case SectionReplication:
		r := &p.Replication
		c.Name = name(r.Plugin, r.Path)
		c.Addr, c.PeerAddr, c.Secret = p.Server.HAAddr, r.MasterAddr, r.Secret
	}
	return c
}

// DecodePluginConfig decodes the table <section>.config of the profile (the
// file, then every --set override under it; an override of the whole table
// replaces what came before, as it does in the host's copy) into v, a
// non-nil pointer to the plugin's config struct, as strictly as the host's
// own sections: an unknown key, a wrong type or an invalid value fails with
// an *Error (or ErrorList) carrying the file's line and column and the key's
// full dotted path ("flush.config.interval"). Keys absent from the table
// leave v's fields untouched, so fill v with defaults first; when the
// section has no config at all, v is unchanged and the result is nil. Fields
// of type Duration, Size and Ratio, and any field implementing
// unstable.Unmarshaler, see the raw TOML value; fields implementing
// encoding.TextUnmarshaler see strings.
//
// It is config.DecodeSection on PluginConfig(section).Document, so a plugin
// calling sdk.Config.Decode on what PluginConfig returns gets exactly the
// same values and the same error text.
//
// On error v may be partly written. On success the profile remembers v, and
// Effective prints the plugin's config from it (defaults included); v must
// not be modified concurrently with a call to Effective.
func (p *Profile) DecodePluginConfig(section string, v any) error {
	switch section {
	case SectionFlush, SectionIndex, SectionReplication:
	default:
		return fmt.Errorf("decoding %s.config: unknown plugin section %q (want %q, %q or %q)", section, section, SectionFlush, SectionReplication, SectionIndex)
	}
	if err := config.DecodeSection(p.File, p.PluginConfig(section).Document, section, v); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plugins == nil {
		p.plugins = map[string]any{}
	}
	p.plugins[section] = v
	return nil
}
