package matrix

import (
	"strings"
	"testing"

	"github.com/keelmq/keel/sdk"
)

const withPlugins = `schema = 1
[plugins.echo]
kind = "replication"
path = "bin/replication-echo"
[plugins.echo.config]
wait_replicas = 1

[plugins.sync-ext]
kind = "replication"
builtin = "sync"
mode = "external"

[[matrix]]
flush = ["sync"]
replication = ["sync", "async", "echo", "sync-ext"]
mode = ["builtin"]
`

func TestPluginsResolve(t *testing.T) {
	c, err := Parse("p.toml", []byte(withPlugins), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cell := range c.Cells() {
		cp := c.PluginsOf(cell)
		if cp.Flush.Source() != "builtin" || cp.Index != nil || cp.Replication == nil {
			t.Fatalf("%s: %+v", cell.Key(), cp)
		}
		got[cell.Replication] = cp.Replication.Label()
	}
	want := map[string]string{
		"sync":     "sync (builtin)",
		"async":    "async (builtin)",
		"echo":     "echo (path bin/replication-echo) {wait_replicas=1}",
		"sync-ext": "sync-ext (external sync)",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: label %q, want %q", k, got[k], w)
		}
	}
	if p, _ := c.Plugin(sdk.KindReplication, "echo", ModeBuiltin); p.Mode != ModeExternal || !p.Declared {
		t.Errorf("a declared path runs external whatever the cell's mode: %+v", p)
	}
}

func TestPluginErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"[[matrix]]\nreplication = [\"quorum\"]\n", `replication: "quorum" is not one of ["none" "async" "sync"]`},
		{"[[matrix]]\nreplication = [\"quorum\"]\n", "declare [plugins.quorum]"},
		{"[plugins.e]\nkind = \"replication\"\npath = \"x\"\n[[matrix]]\nreplication = [\"q\"]\n", `"q" is not one of ["none" "async" "sync" "e"]`},
		{"[plugins.e]\nkind = \"replication\"\npath = \"x\"\n[[matrix]]\nflush = [\"e\"]\n", `flush: "e" is not one of`},
		{"[plugins.e]\nkind = \"queue\"\npath = \"x\"\n", `plugins.e.kind: "queue" is not one of ["flush" "replication" "index"]`},
		{"[plugins.e]\nkind = \"flush\"\n", "plugins.e: give exactly one of path"},
		{"[plugins.e]\nkind = \"flush\"\npath = \"x\"\nbuiltin = \"sync\"\n", "plugins.e: give exactly one of path"},
		{"[plugins.e]\nkind = \"index\"\nbuiltin = \"btree\"\n", `plugins.e.builtin: "btree" is not a builtin index plugin: want one of ["hash"]`},
		{"[plugins.e]\nkind = \"index\"\npath = \"x\"\nmode = \"builtin\"\n", `plugins.e.mode: "builtin" with a path`},
		{"[plugins.e]\nkind = \"index\"\nbuiltin = \"hash\"\nmode = \"remote\"\n", `plugins.e.mode: "remote" is not one of`},
		{"[plugins.sync]\nkind = \"flush\"\nbuiltin = \"sync\"\n", "plugins.sync: the name is taken by a builtin flush value"},
		{"[plugins.e]\nkind = \"flush\"\nbuiltin = \"sync\"\ncolour = 1\n", `unknown key "plugins.e.colour"`},
	} {
		_, err := Parse("a.toml", []byte("schema = 1\n"+tc.doc), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
}

// emptyCatalog has no builtin at all: only declared plugins pass.
type emptyCatalog struct{}

func (emptyCatalog) Names(sdk.Kind) []string { return nil }

func TestCatalogGiven(t *testing.T) {
	if _, err := Parse("a.toml", []byte("schema = 1\n[[matrix]]\nflush = [\"sync\"]\n"), emptyCatalog{}); err == nil ||
		!strings.Contains(err.Error(), `flush: "sync" is not one of []`) {
		t.Errorf("sync against an empty catalog: %v", err)
	}
}
