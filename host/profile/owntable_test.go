package profile

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/keelmq/keel/sdk/config"
)

// secretDoc sets a secret and a plugin table in every form a profile may
// write one: a [<section>.config] table, dotted keys under [<section>], an
// inline config = {...} and an inline table of the whole section.
const secretDoc = `schema = 1
flush = {plugin = "async", config = {interval = "200ms", "odd key" = 1}}

[replication]
plugin = "sync"
secret = "TOP-SECRET"   # not for the plugins
config.wait_replicas = 1
config.timeout = "3s"

[replication.config.extra]
list = [
  "a", # comment
  "b",
]
text = """
[index]
not = "a table"
"""

[index]
plugin = "hash"
config = { buckets = 8, name = 'x' }

[server]
broker_name = "broker-secret"
`

func TestPluginConfigOwnTable(t *testing.T) {
	p := mustLoad(t, secretDoc, "replication.secret=ALSO-SECRET", "index.config.buckets=16",
		`replication={secret = "THIRD-SECRET", config = {timeout = "4s"}, plugin = "sync"}`, "server.broker_name=x")
	for _, section := range []string{SectionFlush, SectionReplication, SectionIndex} {
		c := p.PluginConfig(section)
		doc := string(c.Document)
		for _, leak := range []string{"SECRET", "broker", "schema", "plugin", "hash"} {
			if strings.Contains(doc, leak) {
				t.Errorf("%s: Document holds %q:\n%s", section, leak, doc)
			}
		}
		keys := topKeys(t, c.Document)
		for _, k := range keys {
			if k[0] == config.OverridesKey {
				continue
			}
			if k[0] != section || len(k) > 1 && k[1] != "config" {
				t.Errorf("%s: Document defines %v", section, k)
			}
		}
		// Every line is empty or the file's line with bytes blanked.
		lines := strings.Split(doc, "\n")
		orig := strings.Split(secretDoc, "\n")
		for i, l := range lines[:len(orig)-1] {
			if !blankedFrom(l, orig[i]) {
				t.Errorf("%s: line %d is %q, not a blanked %q", section, i+1, l, orig[i])
			}
		}
		// The plugin decodes what it would have decoded from the whole
		// profile.
		var got, want map[string]any
		errGot := config.DecodeSection(p.File, c.Document, section, &got)
		errWant := config.DecodeSection(p.File, wholeDocument(p), section, &want)
		if errGot != nil || errWant != nil || !reflect.DeepEqual(got, want) || len(got) == 0 {
			t.Errorf("%s: decoded %v %v, want %v %v", section, got, errGot, want, errWant)
		}
	}
}

// TestPluginConfigOwnTablePositions: a problem in a plugin's table is
// reported at the same FILE:LINE:COL from its Document as from the whole
// profile, whichever form the table is written in.
func TestPluginConfigOwnTablePositions(t *testing.T) {
	type cfg struct {
		Interval Duration `toml:"interval"`
	}
	for _, doc := range []string{
		"schema = 1\n[flush]\nplugin = \"async\"\n[flush.config]\ninterval = \"1s\"\n  nope = 1\n",
		"schema = 1\n[flush]\nplugin = \"async\"\nconfig.interval = \"soon\"\n",
		"schema = 1\n[flush]\nplugin = \"async\"\n  config = { interval = 2 }\n",
		"schema = 1\nflush = { plugin = \"async\", config = { interval = \"3\" } }\n",
		"schema = 1\r\n[flush]\r\nplugin = \"async\"\r\n[flush.config]\r\n\tnope = 4\r\n",
	} {
		p := mustLoad(t, doc)
		var a, b cfg
		errA := p.DecodePluginConfig(SectionFlush, &a)
		errB := config.DecodeSection(p.File, []byte(doc), SectionFlush, &b)
		var pe *Error
		if errA == nil || errB == nil || errA.Error() != errB.Error() || !errors.As(errA, &pe) || pe.Line == 0 {
			t.Errorf("%q:\n got %v\nwant %v", doc, errA, errB)
		}
	}
}

func TestPluginTableNothing(t *testing.T) {
	for _, doc := range []string{"", "schema = 1", "[flush]\nplugin = \"x\"\n", "[flush.configs]\na = 1\n", "flush = {plugin = \"x\"}\n", "[flush\n"} {
		if out := pluginTable([]byte(doc), SectionFlush); strings.Trim(string(out), "\n") != "" {
			t.Errorf("%q: got %q", doc, out)
		}
	}
}

// FuzzPluginTable: pluginTable never panics, keeps the document's lines,
// changes a line only by blanking bytes or cutting it, and leaves only keys
// of <section>.config (and the [<section>] header above them); what it keeps
// decodes as the whole document does.
func FuzzPluginTable(f *testing.F) {
	f.Add([]byte(secretDoc), SectionReplication)
	f.Add([]byte(secretDoc), SectionFlush)
	f.Add([]byte(secretDoc), SectionIndex)
	f.Add([]byte(pluginDoc), SectionFlush)
	f.Add([]byte("[[flush.config.x]]\na = 1\n[[flush.config.x]]\nb = 2\n"), SectionFlush)
	f.Add([]byte("flush.config = {a = {b = 1}}\nflush.plugin = 'x'\n"), SectionFlush)
	f.Add([]byte("[ flush . \"config\" ]\na = '''\n[x]\n'''\n"), SectionFlush)
	f.Add([]byte("flush = {config.a = 1, x = 2, config.b = 3,}\n"), SectionFlush)
	f.Add([]byte("flush = {\n  x = 1, # c\n  config = {a = 1} # d\n  , y = 2\n}\n"), SectionFlush)
	f.Add([]byte("[flush]\nconfig.a = 1\n[flush\n"), SectionFlush)
	f.Fuzz(func(t *testing.T, doc []byte, section string) {
		in := bytes.Clone(doc)
		out := pluginTable(doc, section)
		if !bytes.Equal(in, doc) {
			t.Fatal("pluginTable modified its input")
		}
		if bytes.Count(out, []byte("\n")) != bytes.Count(doc, []byte("\n")) {
			t.Fatalf("line count changed:\n%q\n%q", doc, out)
		}
		lines, orig := strings.Split(string(out), "\n"), strings.Split(string(doc), "\n")
		for i, l := range lines {
			if !blankedFrom(l, orig[i]) {
				t.Fatalf("line %d is %q, not a blanked %q", i+1, l, orig[i])
			}
		}
		if !validTOML(doc) {
			return
		}
		if !validTOML(out) {
			t.Fatalf("a valid document gave an invalid table:\n%s\n---\n%s", doc, out)
		}
		cfg := []string{section, "config"}
		for _, k := range topKeys(t, out) {
			if !hasPrefix(k, cfg) && !hasPrefix(cfg, k) {
				t.Fatalf("kept key %q outside %s.config:\n%s\n---\n%s", k, section, doc, out)
			}
		}
		var got, want map[string]any
		errGot := config.DecodeSection("f", out, section, &got)
		errWant := config.DecodeSection("f", doc, section, &want)
		if (errWant == nil) != (errGot == nil) || errWant == nil && !reflect.DeepEqual(got, want) ||
			errWant != nil && errWant.Error() != errGot.Error() {
			t.Fatalf("decoded %v %v, want %v %v\n%s\n---\n%s", got, errGot, want, errWant, doc, out)
		}
	})
}

// blankedFrom reports whether line is orig with some bytes replaced by
// spaces and the end possibly cut.
func blankedFrom(line, orig string) bool {
	if len(line) > len(orig) {
		return false
	}
	for i := range len(line) {
		if line[i] != orig[i] && line[i] != ' ' {
			return false
		}
	}
	return true
}

// validTOML reports whether doc parses.
func validTOML(doc []byte) bool {
	var p unstable.Parser
	p.Reset(doc)
	for p.NextExpression() {
	}
	return p.Error() == nil
}

// topKeys returns the full path of every key-value and table header of doc,
// inline tables' contents included.
func topKeys(t testing.TB, doc []byte) [][]string {
	t.Helper()
	var out [][]string
	var p unstable.Parser
	p.Reset(doc)
	var header []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			header = keyPath(nil, e)
			out = append(out, header)
		case unstable.KeyValue:
			out = appendKeys(out, header, e)
		}
	}
	if err := p.Error(); err != nil {
		t.Fatalf("parsing %q: %v", doc, err)
	}
	return slices.Clip(out)
}

// wholeDocument is what PluginConfig handed plugins before it kept only
// their own table: the whole file with every override appended.
func wholeDocument(p *Profile) []byte {
	var ovs []config.Override
	for _, ov := range p.overlays {
		ovs = append(ovs, config.Override{Arg: ov.src.Override(), Doc: ov.doc})
	}
	return config.WithOverrides(p.data, ovs)
}

// appendKeys appends the path of the key-value e under prefix, and those of
// the entries of its value if that is an inline table.
func appendKeys(out [][]string, prefix []string, e *unstable.Node) [][]string {
	path := keyPath(prefix, e)
	out = append(out, path)
	if v := e.Value(); v.Kind == unstable.InlineTable {
		c := v.Children()
		for c.Next() {
			if c.Node().Kind == unstable.KeyValue {
				out = appendKeys(out, path, c.Node())
			}
		}
	}
	return out
}
