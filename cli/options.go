package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/internal/builtins"
	"github.com/keelmq/keel/sdk"
)

// An Option adds to or changes what Main and Run build: plugins compiled
// in beside the builtins, the in-process benchmark suite, the version
// string, where reports are printed.
type Option func(*settings)

// BenchFunc runs the benchmark suite in this process: args are the
// arguments after "bench", catalog is the same catalog `serve` and
// `profile check` load plugins from (the builtins and every WithPlugin).
// It returns nil for --help (the usage has been printed). Package
// github.com/keelmq/keel/cli/clibench provides one (InProcess); the CLI
// package itself does not link the suite.
type BenchFunc func(args []string, catalog *host.Catalog) error

// settings is what the options set.
type settings struct {
	plugins []plugin
	version string
	stdout  io.Writer
	bench   BenchFunc
}

// plugin is one WithPlugin.
type plugin struct {
	kind    sdk.Kind
	name    string
	factory host.Factory
}

// WithPlugin compiles a plugin in: a profile selects it with
// `plugin = "<name>"` in the [flush], [replication] or [index] section
// (kind sdk.KindFlush, sdk.KindReplication or sdk.KindIndex), exactly as
// it selects a builtin. factory makes a fresh, unconfigured instance each
// time a node (or `profile check`) loads it; the instance must implement
// the kind's interface (sdk.FlushStrategy, sdk.Replicator, sdk.Indexer).
//
// The builtins are always there. Main and Run refuse to start, whatever
// the subcommand, when name is a builtin's name of that kind, was passed
// twice for that kind, is empty or is "none", when kind is not one of the
// three, or when factory is nil: a name never silently replaces another.
func WithPlugin(kind sdk.Kind, name string, factory func() sdk.Plugin) Option {
	return func(s *settings) { s.plugins = append(s.plugins, plugin{kind, name, factory}) }
}

// WithBench makes `bench` run the suite in this process through run
// instead of executing the keelbench binary. See BenchFunc.
func WithBench(run BenchFunc) Option {
	return func(s *settings) { s.bench = run }
}

// WithVersion sets what `version` prints and `serve` logs (default "dev").
func WithVersion(v string) Option {
	return func(s *settings) { s.version = v }
}

// WithOutput sends the reports of `profile check`, `store`, `query`,
// `admin` and `version` to w instead of standard output. Logs and errors
// still go to standard error.
func WithOutput(w io.Writer) Option {
	return func(s *settings) { s.stdout = w }
}

// newApp applies opts and builds the catalog: the builtins, then each
// WithPlugin in order.
func newApp(opts []Option) (*app, error) {
	s := settings{version: "dev", stdout: os.Stdout}
	for _, o := range opts {
		o(&s)
	}
	builtin, cat := builtins.Catalog(), builtins.Catalog()
	var errs []error
	for _, p := range s.plugins {
		if err := addPlugin(cat, builtin, p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &app{catalog: cat, version: s.version, stdout: s.stdout, bench: s.bench}, nil
}

// addPlugin adds one WithPlugin to cat, which holds the builtins and the
// WithPlugins before it; builtin holds only the builtins.
func addPlugin(cat, builtin *host.Catalog, p plugin) error {
	what := fmt.Sprintf("compiled-in %s plugin %q", p.kind, p.name)
	switch {
	case p.kind != sdk.KindFlush && p.kind != sdk.KindReplication && p.kind != sdk.KindIndex:
		return fmt.Errorf("%s: unknown kind %q (want %s, %s or %s)", what, p.kind, sdk.KindFlush, sdk.KindReplication, sdk.KindIndex)
	case p.name == "" || p.name == profile.PluginNone:
		return fmt.Errorf("%s: a profile cannot select that name: choose another", what)
	case p.factory == nil:
		return fmt.Errorf("%s: the factory is nil", what)
	}
	if _, taken := builtin.Lookup(p.kind, p.name); taken {
		return fmt.Errorf("%s: a builtin has that name (builtins: %s): choose another", what, strings.Join(builtin.Names(p.kind), ", "))
	}
	if err := cat.Add(p.kind, p.name, p.factory); err != nil {
		return fmt.Errorf("%s: passed to WithPlugin twice: %w", what, err)
	}
	return nil
}
