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
//   - Name: PluginName of the section: its builtin, or its path for an
//     external binary;
//   - File: the profile's file name (p.File), for error messages;
//   - Document: the plugin's own table and nothing else. It is the profile
//     file as read with every byte outside <section>.config blanked (see
//     pluginTable: the table's lines and columns are those of the file,
//     every other line is empty), followed by the --set overrides that
//     reach the table, appended by config.WithOverrides. An override of a
//     key in the table is passed as given; one of the whole section
//     (`replication={secret="…", config={…}}`) is cut to its config
//     entries and named by what is left of it (`replication = { config =
//     {…} }`); any other override is left out. So sdk.Config.Decode sees
//     the overridden values and reports problems at the file's lines and
//     columns or against the override that caused them, exactly as
//     DecodePluginConfig does (it decodes this same Document), and no
//     other section's keys, secrets included, reach the plugin;
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
	c := sdk.Config{
		File:     p.File,
		Document: config.WithOverrides(pluginTable(p.data, section), p.pluginOverrides(section)),
		Section:  section,
		Role:     p.Replication.Role,
		DataDir:  filepath.Join(p.Store.Dir, "plugins", section),
	}
	switch section {
	case SectionFlush:
		c.Name = PluginName(p.Flush.Plugin, p.Flush.Path)
	case SectionIndex:
		c.Name = PluginName(p.Index.Plugin, p.Index.Path)
	case SectionReplication:
		r := &p.Replication
		c.Name = PluginName(r.Plugin, r.Path)
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

// PluginName is the name of the plugin a section with plugin (a builtin)
// and path (an external binary) selects: the builtin, or the path when
// there is no builtin. A loaded profile sets exactly one of the two.
func PluginName(plugin, path string) string {
	if plugin != "" {
		return plugin
	}
	return path
}

// pluginOverrides returns the --set overrides that reach the table
// <section>.config, as PluginConfig describes.
func (p *Profile) pluginOverrides(section string) []config.Override {
	cfg := []string{section, "config"}
	var out []config.Override
	for _, ov := range p.overlays {
		switch {
		case hasPrefix(ov.path, cfg):
			out = append(out, config.Override{Arg: ov.src.Override(), Doc: ov.doc})
		case hasPrefix(cfg, ov.path):
			if kept := joinSpans(ov.doc, tableSpans(ov.doc, section)); len(kept) > 0 {
				out = append(out, config.Override{Arg: string(kept), Doc: append(kept, '\n')})
			}
		}
	}
	return out
}
