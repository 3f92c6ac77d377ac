package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/pelletier/go-toml/v2"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/internal/pluginrpc"
	"github.com/keelmq/keel/sdk"
)

// Loader makes the plugins a cell's axes name (matrix.Plugin):
//
//   - a builtin name in mode "builtin": a fresh instance from Catalog's
//     factory, in this process;
//   - a builtin name in mode "external": the go-plugin binary `make build`
//     puts in bin/ for keel's own builtins (externalBinary), found in
//     PluginDirs, next to the running executable, in ./bin or on PATH;
//     missing, the cell fails with ErrUnavailable (reported skipped);
//   - a declared path: that binary, dialled with the declared args.
//
// Every plugin is configured with its own config table (Plugin.Config)
// under Role "master" (a replication pair's second instance "slave").
// Whatever a Loader starts is stopped by the Runner, Replication or
// Indexer it returns, or before it returns an error.
type Loader struct {
	// Catalog has the builtin names; nil means matrix.DefaultCatalog().
	Catalog *host.Catalog
	// PluginDirs are searched first for the external binaries of builtin
	// names.
	PluginDirs []string
	// File is the matrix file, named in the plugins' config errors.
	File string
	// Logger receives external plugins' logs; nil discards them.
	Logger *slog.Logger
}

func (l *Loader) catalog() *host.Catalog {
	if l.Catalog == nil {
		l.Catalog = matrix.DefaultCatalog()
	}
	return l.Catalog
}

func (l *Loader) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Logger
}

// open makes a fresh instance of p, an sdk.Plugin of kind; release ends
// what it started (an external process) after the plugin's Stop.
func (l *Loader) open(ctx context.Context, kind sdk.Kind, p matrix.Plugin) (pl sdk.Plugin, release func(), err error) {
	if p.Mode == matrix.ModeBuiltin && p.Path == "" {
		f, ok := l.catalog().Lookup(kind, p.Builtin)
		if !ok {
			return nil, nil, fmt.Errorf("%s %q: no builtin %s plugin %q in this build's catalog (it has %q): %w",
				kind, p.Name, kind, p.Builtin, l.catalog().Names(kind), ErrUnavailable)
		}
		return f(), func() {}, nil
	}
	path, args := p.Path, p.Args
	if path == "" {
		bin, extra, ok := externalBinary(kind, p.Builtin)
		if !ok {
			return nil, nil, fmt.Errorf("%s %q in external mode: keel ships no binary for %q; declare it under [plugins] with its path: %w",
				kind, p.Name, p.Builtin, ErrUnavailable)
		}
		if path, err = findPlugin(bin, l.PluginDirs); err != nil {
			return nil, nil, err
		}
		args = append(extra, args...)
	}
	c, err := pluginrpc.Dial(ctx, pluginrpc.DialOptions{Path: path, Args: args, Logger: l.logger()})
	if err != nil {
		return nil, nil, fmt.Errorf("%s %q: start %s: %w", kind, p.Name, path, err)
	}
	switch kind {
	case sdk.KindFlush:
		pl, err = c.FlushStrategy()
	case sdk.KindReplication:
		pl, err = c.Replicator()
	default:
		pl, err = c.Indexer()
	}
	if err != nil {
		c.Kill()
		return nil, nil, fmt.Errorf("%s %q: %s: %w", kind, p.Name, path, err)
	}
	return pl, c.Kill, nil
}

// config is the sdk.Config p is configured with.
func (l *Loader) config(kind sdk.Kind, p matrix.Plugin, role string) (sdk.Config, error) {
	name := p.Builtin
	if p.Path != "" {
		name = p.Path
	}
	cfg := sdk.Config{Name: name, File: l.File, Section: string(kind), Role: role}
	table := maps.Clone(benchDefaults(kind, p))
	if table == nil {
		table = map[string]any{}
	}
	maps.Copy(table, p.Config)
	if len(table) == 0 {
		return cfg, nil
	}
	doc, err := toml.Marshal(map[string]any{string(kind): map[string]any{"config": table}})
	if err != nil {
		return cfg, fmt.Errorf("%s %q: encode its config table: %w", kind, p.Name, err)
	}
	cfg.Document = doc
	return cfg, nil
}

// benchDefaults are the config keys the benchmark sets for keel's own
// replicators (in-process or their binaries) unless the matrix sets them:
// benchmark stores are fresh by construction, so a master with an empty
// log need not wait, fenced, for its replica's handshake.
func benchDefaults(kind sdk.Kind, p matrix.Plugin) map[string]any {
	if kind == sdk.KindReplication && p.Path == "" && slices.Contains(keelReplicators, p.Builtin) {
		return map[string]any{"start_fenced": "never"}
	}
	return nil
}

// openAs is open and config for a plugin that must implement T: the
// instance, its sdk.Config for role and its release; on error nothing is
// left running.
func openAs[T sdk.Plugin](ctx context.Context, l *Loader, kind sdk.Kind, p matrix.Plugin, role string) (T, sdk.Config, func(), error) {
	var zero T
	pl, release, err := l.open(ctx, kind, p)
	if err != nil {
		return zero, sdk.Config{}, nil, err
	}
	t, ok := pl.(T)
	cfg, err := l.config(kind, p, role)
	if err == nil && !ok {
		err = fmt.Errorf("%s %q: the plugin is a %T, not a %s plugin", kind, p.Name, pl, kind)
	}
	if err != nil {
		release()
		return zero, sdk.Config{}, nil, err
	}
	return t, cfg, release, nil
}

// Flush makes p's flush strategy, configured, as a Runner.
func (l *Loader) Flush(ctx context.Context, p matrix.Plugin) (Runner, error) {
	fs, cfg, release, err := openAs[sdk.FlushStrategy](ctx, l, sdk.KindFlush, p, "master")
	if err != nil {
		return nil, err
	}
	return PluginRunner(ctx, fs, cfg, release)
}

// FlushPolicy is what acks wait for under p: its flush strategy is made,
// configured, asked and released (an external one's process is started
// and stopped).
func (l *Loader) FlushPolicy(ctx context.Context, p matrix.Plugin) (sdk.FlushPolicy, error) {
	r, err := l.Flush(ctx, p)
	if err != nil {
		return sdk.FlushPolicy{}, err
	}
	pol := r.Policy()
	return pol, r.Stop(ctx)
}

// Index makes p's indexer, configured with DataDir dir, as an Indexer.
func (l *Loader) Index(ctx context.Context, p matrix.Plugin, dir string) (Indexer, error) {
	ix, cfg, release, err := openAs[sdk.Indexer](ctx, l, sdk.KindIndex, p, "master")
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dir
	if err := ix.Configure(ctx, cfg); err != nil {
		release()
		return nil, fmt.Errorf("configure index %q: %w", p.Name, err)
	}
	return PluginIndexer(ix, release), nil
}

// Replication makes p's replication pair (newPluginPair): a master and a
// slave instance, each made like one plugin.
func (l *Loader) Replication(ctx context.Context, p matrix.Plugin, env ReplEnv) (Replication, error) {
	return newPluginPair(p.Name, func(role string) (sdk.Replicator, sdk.Config, func(), error) {
		return openAs[sdk.Replicator](ctx, l, sdk.KindReplication, p, role)
	}, env)
}
