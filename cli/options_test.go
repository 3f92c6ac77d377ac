package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/sdk"
)

// A stand-in plugin value: the catalog never calls the factory here.
type fakePlugin struct{ sdk.Plugin }

func fake() sdk.Plugin { return fakePlugin{} }

// TestWithPlugin: a compiled-in plugin joins the builtins under its own
// name; a name that would shadow a builtin, repeat another, or that a
// profile cannot select is an error at start, for every subcommand.
func TestWithPlugin(t *testing.T) {
	a, err := newApp([]Option{WithPlugin(sdk.KindReplication, "echo", fake), WithPlugin(sdk.KindIndex, "echo", fake)})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.catalog.Names(sdk.KindReplication), ","); got != "async,echo,sync" {
		t.Errorf("replication catalog %s, want async,echo,sync", got)
	}
	if _, ok := a.catalog.Lookup(sdk.KindIndex, "echo"); !ok {
		t.Errorf("index plugin echo missing: %v", a.catalog.Names(sdk.KindIndex))
	}
	if _, ok := a.catalog.Lookup(sdk.KindFlush, "sync"); !ok {
		t.Errorf("the builtins are gone: flush %v", a.catalog.Names(sdk.KindFlush))
	}

	for _, c := range []struct {
		name string
		opts []Option
		want []string
	}{
		{"builtin", []Option{WithPlugin(sdk.KindReplication, "sync", fake)}, []string{`compiled-in replication plugin "sync"`, "a builtin has that name", "async, sync"}},
		{"builtin flush", []Option{WithPlugin(sdk.KindFlush, "async", fake)}, []string{`compiled-in flush plugin "async"`, "a builtin has that name"}},
		{"twice", []Option{WithPlugin(sdk.KindReplication, "echo", fake), WithPlugin(sdk.KindReplication, "echo", fake)}, []string{`"echo"`, "twice"}},
		{"none", []Option{WithPlugin(sdk.KindIndex, "none", fake)}, []string{`"none"`, "cannot select"}},
		{"empty", []Option{WithPlugin(sdk.KindIndex, "", fake)}, []string{`""`, "cannot select"}},
		{"kind", []Option{WithPlugin("storage", "x", fake)}, []string{`unknown kind "storage"`}},
		{"nil", []Option{WithPlugin(sdk.KindIndex, "x", nil)}, []string{"factory is nil"}},
		{"two errors", []Option{WithPlugin(sdk.KindIndex, "hash", fake), WithPlugin(sdk.KindIndex, "", fake)}, []string{`"hash"`, `""`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run([]string{"version"}, append(c.opts, WithOutput(&out))...)
			if err == nil {
				t.Fatalf("started (printed %q)", out.String())
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if out.Len() != 0 {
				t.Errorf("printed %q before refusing", out.String())
			}
		})
	}
}

// TestWithBench: bench runs the BenchFunc in this process with its
// arguments and the catalog serve uses; version prints WithVersion's.
func TestWithBench(t *testing.T) {
	var gotArgs []string
	var gotCat *host.Catalog
	run := func(args []string, cat *host.Catalog) error { gotArgs, gotCat = args, cat; return nil }
	if err := Run([]string{"bench", "--config", "x.toml", "--quick"}, WithBench(run), WithPlugin(sdk.KindReplication, "echo", fake)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(gotArgs, " ") != "--config x.toml --quick" {
		t.Errorf("bench got args %q", gotArgs)
	}
	if _, ok := gotCat.Lookup(sdk.KindReplication, "echo"); !ok {
		t.Errorf("bench's catalog lacks the compiled-in plugin: %v", gotCat.Names(sdk.KindReplication))
	}
	var out bytes.Buffer
	if err := Run([]string{"version"}, WithVersion("v1.2.3"), WithOutput(&out)); err != nil || out.String() != "keel v1.2.3\n" {
		t.Errorf("version: %v, printed %q", err, out.String())
	}
}
