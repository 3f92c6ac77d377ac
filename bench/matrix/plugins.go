package matrix

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/internal/builtins"
	"github.com/keelmq/keel/sdk"
)

// Plugin modes: how a plugin runs in a cell.
const (
	// ModeBuiltin runs the plugin in the benchmark's process, made by the
	// catalog's factory.
	ModeBuiltin = "builtin"
	// ModeExternal runs it as a go-plugin process: the declared path, or,
	// for one of keel's builtin names, the binary `make build` puts in
	// bin/ (keel-flush, replication-<name>, keel-index-hash).
	ModeExternal = "external"
)

// Modes are the values of a block's mode axis and of a [plugins] table's
// mode key.
var Modes = []string{ModeBuiltin, ModeExternal}

// None is the replication and index axis value that runs no plugin.
const None = "none"

// Kinds are the plugin kinds an axis names, in axis order.
var Kinds = []sdk.Kind{sdk.KindFlush, sdk.KindReplication, sdk.KindIndex}

// Catalog is where a matrix looks builtin names up: *host.Catalog.
type Catalog interface {
	Names(kind sdk.Kind) []string
}

// DefaultCatalog is the catalog a matrix, and the benchmark, use when none
// is given: keel's own builtins (internal/builtins.Catalog).
func DefaultCatalog() *host.Catalog { return builtins.Catalog() }

// PluginDecl is a [plugins.<name>] table: a plugin an axis may list by
// <name>, beside the builtin names.
//
//	[plugins.echo]
//	kind   = "replication"             # "flush", "replication" or "index"
//	path   = "bin/replication-echo"    # an external binary, or:
//	# builtin = "sync"                 # a name in the catalog
//	mode   = "external"                # default: "external" with path,
//	                                   # "builtin" with builtin
//	args   = []                        # extra arguments of an external binary
//	[plugins.echo.config]              # the plugin's own [<kind>.config] table
//	wait_replicas = 1
//
// Exactly one of path and builtin is given; path requires mode
// "external". A relative path is relative to the working directory.
type PluginDecl struct {
	// Kind is the axis: "flush", "replication" or "index".
	Kind string `toml:"kind" json:"kind"`
	// Builtin is the catalog name run (empty for a path).
	Builtin string `toml:"builtin" json:"builtin,omitempty"`
	// Path is the external binary (empty for a builtin name: see
	// ModeExternal for the binary then run).
	Path string `toml:"path" json:"path,omitempty"`
	// Mode is ModeBuiltin or ModeExternal.
	Mode string   `toml:"mode" json:"mode"`
	Args []string `toml:"args" json:"args,omitempty"`
	// Config is the plugin's own config table (nil: every key at its
	// default).
	Config map[string]any `toml:"config" json:"config,omitempty"`
}

// Plugin is what one axis of a cell runs, resolved from the axis value
// (Config.Plugin): a builtin name in the cell's mode, or a [plugins]
// table.
type Plugin struct {
	// Name is the axis value: a builtin name or a [plugins] table name.
	Name string `json:"name"`
	PluginDecl
	// Declared is true when the axis value named a [plugins] table.
	Declared bool `json:"declared,omitempty"`
}

// Source says what ran: "builtin" (in-process), "external" (a builtin
// name's binary) or "path" (a declared binary).
func (p Plugin) Source() string {
	switch {
	case p.Path != "":
		return "path"
	case p.Mode == ModeExternal:
		return "external"
	}
	return "builtin"
}

// Label is "name (builtin)", "name (external)" or "name (path bin/x)",
// with the config's keys when there is one: "echo (path bin/x)
// {wait_replicas=1}".
func (p Plugin) Label() string {
	s := p.Name + " (" + p.Source()
	if p.Path != "" {
		s += " " + p.Path
	} else if p.Builtin != "" && p.Builtin != p.Name {
		s += " " + p.Builtin
	}
	s += ")"
	if len(p.Config) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(p.Config)) {
			kv = append(kv, fmt.Sprintf("%s=%v", k, p.Config[k]))
		}
		s += " {" + strings.Join(kv, ", ") + "}"
	}
	return s
}

// Plugin resolves the axis value name of kind in a cell of mode: the
// [plugins] table of that name (whose own mode wins), else the builtin
// name run in mode. ok is false for None.
func (c *Config) Plugin(kind sdk.Kind, name, mode string) (p Plugin, ok bool) {
	if name == None && kind != sdk.KindFlush {
		return Plugin{}, false
	}
	if d, found := c.Plugins[name]; found && d.Kind == string(kind) {
		return Plugin{Name: name, PluginDecl: d, Declared: true}, true
	}
	return Builtin(kind, name, mode), true
}

// Builtin is the Plugin running the builtin name of kind in mode.
func Builtin(kind sdk.Kind, name, mode string) Plugin {
	return Plugin{Name: name, PluginDecl: PluginDecl{Kind: string(kind), Builtin: name, Mode: mode}}
}

// CellPlugins are what a cell's axes run; Replication and Index are nil
// for None.
type CellPlugins struct {
	Flush       Plugin
	Replication *Plugin
	Index       *Plugin
}

// List is the plugins in axis order.
func (cp CellPlugins) List() []Plugin {
	out := []Plugin{cp.Flush}
	for _, p := range []*Plugin{cp.Replication, cp.Index} {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// Describe says what ran, one "axis=label" per plugin in order:
// "flush=sync (builtin) replication=echo (path bin/replication-echo)";
// an axis at None is left out.
func Describe(ps []Plugin) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Kind + "=" + p.Label()
	}
	return strings.Join(parts, " ")
}

// PluginsOf resolves every axis of cell (see Plugin).
func (c *Config) PluginsOf(cell Cell) CellPlugins {
	f, _ := c.Plugin(sdk.KindFlush, cell.Flush, cell.Mode)
	cp := CellPlugins{Flush: f}
	if r, ok := c.Plugin(sdk.KindReplication, cell.Replication, cell.Mode); ok {
		cp.Replication = &r
	}
	if ix, ok := c.Plugin(sdk.KindIndex, cell.Index, cell.Mode); ok {
		cp.Index = &ix
	}
	return cp
}

// fillPlugins sets each declaration's default mode.
func (c *Config) fillPlugins() {
	for name, d := range c.Plugins {
		if d.Mode == "" {
			d.Mode = ModeBuiltin
			if d.Path != "" {
				d.Mode = ModeExternal
			}
		}
		c.Plugins[name] = d
	}
}

// declared lists the [plugins] tables of kind, sorted.
func (c *Config) declared(kind sdk.Kind) []string {
	var out []string
	for name, d := range c.Plugins {
		if d.Kind == string(kind) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// validatePlugins checks the [plugins] tables against cat and reports
// each problem with bad.
func (c *Config) validatePlugins(cat Catalog, bad func(string, ...any)) {
	kinds := make([]string, len(Kinds))
	for i, k := range Kinds {
		kinds[i] = string(k)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Plugins)) {
		d := c.Plugins[name]
		k := "plugins." + name
		if !slices.Contains(kinds, d.Kind) {
			bad("%s.kind: %q is not one of %q", k, d.Kind, kinds)
			continue
		}
		kind := sdk.Kind(d.Kind)
		if name == None || slices.Contains(cat.Names(kind), name) {
			bad("%s: the name is taken by a builtin %s value; call the table something else", k, kind)
		}
		switch {
		case (d.Path == "") == (d.Builtin == ""):
			bad("%s: give exactly one of path (an external binary) and builtin (one of %q)", k, cat.Names(kind))
		case d.Builtin != "" && !slices.Contains(cat.Names(kind), d.Builtin):
			bad("%s.builtin: %q is not a builtin %s plugin: want one of %q", k, d.Builtin, kind, cat.Names(kind))
		}
		if !slices.Contains(Modes, d.Mode) {
			bad("%s.mode: %q is not one of %q", k, d.Mode, Modes)
		} else if d.Path != "" && d.Mode != ModeExternal {
			bad("%s.mode: %q with a path: a binary runs in mode %q", k, d.Mode, ModeExternal)
		}
	}
}

// checkAxis checks the values of one axis of a block: builtin names of
// kind, [plugins] tables of kind, and None for replication and index.
func (c *Config) checkAxis(key string, kind sdk.Kind, values []string, cat Catalog, bad func(string, ...any)) {
	for _, v := range values {
		if v == None && kind != sdk.KindFlush {
			continue
		}
		if d, ok := c.Plugins[v]; ok && d.Kind == string(kind) {
			continue
		}
		if slices.Contains(cat.Names(kind), v) {
			continue
		}
		allowed := cat.Names(kind)
		if kind != sdk.KindFlush {
			allowed = append([]string{None}, allowed...)
		}
		declared := "none"
		if d := c.declared(kind); len(d) > 0 {
			declared = fmt.Sprintf("%q", d)
			allowed = append(allowed, d...)
		}
		bad("%s: %q is not one of %q (builtin %s names of this build; [plugins] tables of kind %q: %s; to bench your own, declare [plugins.%s] with kind = %q and path or builtin)",
			key, v, allowed, kind, kind, declared, v, kind)
	}
}
