package profile

import (
	"path/filepath"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
)

// The value types, the errors and the strict decoder live in sdk/config, so
// that plugins (which must not import host/) use the very same code; these
// aliases keep this package's API as it was.

// Duration is config.Duration: a duration string such as "500ms" or "72h".
type Duration = config.Duration

// Size is config.Size: a byte count, or a string such as "4MiB" or "1GB".
type Size = config.Size

// Ratio is config.Ratio: a fraction in [0, 1], 0.75 or "75%".
type Ratio = config.Ratio

// Error is config.Error: one problem in a profile, with FILE:LINE:COL, the
// key's dotted path and what is allowed.
type Error = config.Error

// ErrorList is config.ErrorList: several problems, in document order.
type ErrorList = config.ErrorList

// ParseDuration parses a profile duration; see config.ParseDuration.
func ParseDuration(s string) (Duration, error) { return config.ParseDuration(s) }

// ParseSize parses a size string; see config.ParseSize.
func ParseSize(s string) (Size, error) { return config.ParseSize(s) }

// ParseRatio parses "0.75" or "75%"; see config.ParseRatio.
func ParseRatio(s string) (Ratio, error) { return config.ParseRatio(s) }

// KeyPosition returns the line and column of the key dottedKey in the TOML
// document doc; see config.KeyPosition.
func KeyPosition(doc []byte, dottedKey string) (line, col int, ok bool) {
	return config.KeyPosition(doc, dottedKey)
}

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
