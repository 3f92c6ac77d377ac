package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// pluginConfig is a plugin's config struct, as a flush strategy would write it.
type pluginConfig struct {
	Interval   Duration `toml:"interval"`
	LeastPages int      `toml:"least_pages"`
	Buffer     Size     `toml:"buffer"`
	Threshold  Ratio    `toml:"threshold"`
	Mode       string   `toml:"mode"`
	Retry      struct {
		Max     int      `toml:"max"`
		Backoff Duration `toml:"backoff"`
	} `toml:"retry"`
}

func defaults() pluginConfig {
	c := pluginConfig{Interval: Duration(500 * time.Millisecond), LeastPages: 4, Buffer: 1 << 20, Threshold: 0.5, Mode: "timed"}
	c.Retry.Max = 3
	return c
}

// profileDoc is a whole profile: other sections hold keys pluginConfig does
// not know, which DecodeSection must ignore.
const profileDoc = `schema = 1
[store]
segment_size = "64MiB"
whatever = { x = 1 }

[flush]
plugin = "async"

[flush.config]
interval = "200ms"
buffer = "4MiB"
threshold = "25%"

[flush.config.retry]
backoff = "1s"

[index]
plugin = "hash"
[index.config]
unknown_to_flush = true
`

func TestDecodeSection(t *testing.T) {
	c := defaults()
	if err := DecodeSection("p.toml", []byte(profileDoc), "flush", &c); err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.Interval = Duration(200 * time.Millisecond)
	want.Buffer = 4 << 20
	want.Threshold = 0.25
	want.Retry.Backoff = Duration(time.Second)
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config:\n got %+v\nwant %+v", c, want)
	}
	// A section without config leaves v untouched.
	c = defaults()
	if err := DecodeSection("p.toml", []byte(profileDoc), "replication", &c); err != nil || !reflect.DeepEqual(c, defaults()) {
		t.Errorf("replication: err %v, config %+v", err, c)
	}
	// A map target takes the table as it is.
	m := map[string]any{}
	if err := DecodeSection("p.toml", []byte(profileDoc), "index", &m); err != nil || !reflect.DeepEqual(m, map[string]any{"unknown_to_flush": true}) {
		t.Errorf("map: err %v, %v", err, m)
	}
	// Inline and dotted forms of the table.
	for _, doc := range []string{
		"flush = { plugin = \"x\", config = { interval = \"3s\", retry = { max = 1 } } }\n",
		"[flush]\nconfig.interval = \"3s\"\nconfig.retry.max = 1\n",
		"flush.config.interval = \"3s\"\n[flush.config.retry]\nmax = 1\n",
	} {
		c = defaults()
		if err := DecodeSection("p.toml", []byte(doc), "flush", &c); err != nil || c.Interval.D() != 3*time.Second || c.Retry.Max != 1 {
			t.Errorf("%q: err %v, config %+v", doc, err, c)
		}
	}
}

func TestDecodeSectionErrors(t *testing.T) {
	head := "schema = 1\n[store]\nbogus = 1\n[flush]\nplugin = \"async\"\n[flush.config]\n" // the config starts on line 7
	allowed := "allowed in [flush.config]: interval, least_pages, buffer, threshold, mode, retry"
	tests := []struct {
		name, body, want string
	}{
		{"unknown key", "intervall = \"1s\"\n",
			`p.toml:7:1: flush.config.intervall: unknown key (did you mean "interval"?); ` + allowed},
		{"unknown nested key", "retry.tries = 3\n",
			`p.toml:7:7: flush.config.retry.tries: unknown key; allowed in [flush.config.retry]: max, backoff`},
		{"case matters", "Interval = \"1s\"\n",
			`p.toml:7:1: flush.config.Interval: unknown key (did you mean "interval"?); ` + allowed + ` (keys are case-sensitive)`},
		{"wrong type", "least_pages = \"four\"\n",
			`p.toml:7:15: flush.config.least_pages: want an integer, got a string`},
		{"wrong type for a table", "retry = 3\n",
			`p.toml:7:9: flush.config.retry: want a table, got an integer`},
		{"invalid duration", "interval = \"5 parsecs\"\n",
			`p.toml:7:12: flush.config.interval: invalid duration "5 parsecs" (want e.g. "500ms", "2s")`},
		{"bare number duration", "mode = \"x\"\ninterval = 5\n",
			`p.toml:8:12: flush.config.interval: invalid duration 5: a bare number has no unit (want e.g. "500ms", "2s"; quote it)`},
		{"invalid size", "buffer = \"lots\"\n",
			`p.toml:7:10: flush.config.buffer: invalid size "lots" (want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes)`},
		{"negative size", "buffer = -1\n",
			`p.toml:7:10: flush.config.buffer: invalid size -1: must not be negative`},
		{"invalid ratio", "threshold = 2\n",
			`p.toml:7:13: flush.config.threshold: invalid ratio 2: out of range (want a number between 0 and 1 such as 0.75, or a percentage such as "75%")`},
		{"nested invalid duration", "[flush.config.retry]\nbackoff = \"later\"\n",
			`p.toml:8:11: flush.config.retry.backoff: invalid duration "later" (want e.g. "500ms", "2s")`},
		{"key below a duration", "interval.ms = \"5ms\"\n",
			`p.toml:7:10: flush.config.interval.ms: unknown key: flush.config.interval is a duration string (e.g. "500ms", "2s"), not a table`},
		{"two unknown keys, sorted", "b = 1\nmode = \"m\"\na = 2\n",
			"p.toml:7:1: flush.config.b: unknown key; " + allowed + "\np.toml:9:1: flush.config.a: unknown key; " + allowed},
		{"syntax error", "mode = \n",
			`p.toml:7:8: syntax error: unexpected character U+000A at start of value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults()
			err := DecodeSection("p.toml", []byte(head+tt.body), "flush", &c)
			if err == nil || err.Error() != tt.want {
				t.Errorf("err:\n got %v\nwant %s", err, tt.want)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.File != "p.toml" || pe.Line == 0 {
				t.Errorf("%T %v is not a positioned *Error", err, err)
			}
		})
	}
	// A failing value inside an inline table is found, not just its table.
	doc := "schema = 1\nflush = { plugin = \"sync\", config = { interval = \"3s\", retry = { max = 1, backoff = \"oops\" } } }\n"
	c := defaults()
	err := DecodeSection("p.toml", []byte(doc), "flush", &c)
	want := `p.toml:2:85: flush.config.retry.backoff: invalid duration "oops" (want e.g. "500ms", "2s")`
	if err == nil || err.Error() != want {
		t.Errorf("inline: got %v\nwant %s", err, want)
	}
}

func TestDecodeSectionMisuse(t *testing.T) {
	var c pluginConfig
	for _, tt := range []struct {
		section string
		v       any
		want    string
	}{
		{"flush", c, "want a non-nil pointer"},
		{"flush", (*pluginConfig)(nil), "want a non-nil pointer"},
		{"flush", nil, "want a non-nil pointer"},
		{"a.b", &c, "invalid section name"},
		{"", &c, "invalid section name"},
		{OverridesKey, &c, "invalid section name"},
	} {
		err := DecodeSection("p.toml", []byte(profileDoc), tt.section, tt.v)
		var pe *Error
		if err == nil || !strings.Contains(err.Error(), tt.want) || errors.As(err, &pe) {
			t.Errorf("DecodeSection(%q, %T): %v, want a plain error containing %q", tt.section, tt.v, err, tt.want)
		}
	}
}

// ov builds an Override the way the host does for a key=value argument.
func ov(arg string) Override {
	k, v, _ := strings.Cut(arg, "=")
	return Override{Arg: arg, Doc: []byte(k + " = " + v + "\n")}
}

func TestDecodeSectionOverrides(t *testing.T) {
	decode := func(doc string, ovs ...Override) (pluginConfig, error) {
		c := defaults()
		err := DecodeSection("p.toml", WithOverrides([]byte(doc), ovs), "flush", &c)
		return c, err
	}
	c, err := decode(profileDoc, ov(`flush.config.interval="1s"`), ov("flush.config.retry.max=9"), ov(`store.segment_size="1GiB"`))
	if err != nil || c.Interval.D() != time.Second || c.Retry.Max != 9 || c.Buffer != 4<<20 || c.Retry.Backoff.D() != time.Second {
		t.Errorf("key overrides: err %v, %+v", err, c)
	}
	// A later override wins.
	c, err = decode(profileDoc, ov(`flush.config.mode="a"`), ov(`flush.config.mode="b"`))
	if err != nil || c.Mode != "b" {
		t.Errorf("later override: err %v, mode %q", err, c.Mode)
	}
	// An override of the whole table replaces the file's and earlier ones.
	c, err = decode(profileDoc, ov(`flush.config.mode="a"`), ov(`flush.config={least_pages = 1}`), ov(`flush.config.mode="b"`))
	want := defaults()
	want.LeastPages, want.Mode = 1, "b"
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Errorf("table override: err %v\n got %+v\nwant %+v", err, c, want)
	}
	// An override above the table is decoded on top.
	c, err = decode(profileDoc, ov(`flush={config={mode="up"}}`))
	if err != nil || c.Mode != "up" || c.Buffer != 4<<20 {
		t.Errorf("section override: err %v, %+v", err, c)
	}
	// An override alone creates the table.
	c, err = decode("schema = 1\n", ov(`flush.config.mode="fast"`))
	if err != nil || c.Mode != "fast" {
		t.Errorf("override only: err %v, %+v", err, c)
	}
	// Problems in an override name it; problems in the file keep their place.
	_, err = decode(profileDoc, ov(`flush.config.interval="soon"`))
	if want := `p.toml: --set flush.config.interval="soon": flush.config.interval: invalid duration "soon" (want e.g. "500ms", "2s")`; err == nil || err.Error() != want {
		t.Errorf("override error:\n got %v\nwant %s", err, want)
	}
	_, err = decode(profileDoc, ov("flush.config.nope=1"))
	if want := `p.toml: --set flush.config.nope=1: flush.config.nope: unknown key (did you mean "mode"?); allowed in [flush.config]: interval, least_pages, buffer, threshold, mode, retry`; err == nil || err.Error() != want {
		t.Errorf("override unknown key:\n got %v\nwant %s", err, want)
	}
	_, err = decode(strings.Replace(profileDoc, `"200ms"`, `"2 fortnights"`, 1), ov("flush.config.mode=\"x\""))
	if want := `p.toml:10:12: flush.config.interval: invalid duration "2 fortnights" (want e.g. "500ms", "2s")`; err == nil || err.Error() != want {
		t.Errorf("file error with overrides:\n got %v\nwant %s", err, want)
	}
	// Overrides of other sections are not looked at.
	if _, err = decode(profileDoc, ov("index.config.nope=1")); err != nil {
		t.Errorf("other section's override: %v", err)
	}
}

func TestDecodeSectionMalformedOverrides(t *testing.T) {
	for _, tt := range []struct{ tail, want string }{
		{"[[--set]]\narg = \"a=1\"\n", "an entry lacks arg or doc"},
		{"[[--set]]\ndoc = \"a = 1\"\n", "an entry lacks arg or doc"},
		{"[[--set]]\narg = \"a=1\"\ndoc = \"a = 1\"\nother = 2\n", "unexpected key --set.other"},
		{"[[--set]]\narg = \"a=1\"\ndoc = 1\n", "unexpected key --set.doc"},
		{"\"--set\" = []\n", "not an array of tables"},
		{"[--set]\n", "not an array of tables"},
		{"[[--set]]\narg = \"a=\"\ndoc = \"a = \"\n", "syntax error"},
		{"[[--set]]\narg = \"a=1\"\ndoc = \"a = 1\\nb = 2\\n\"\n", "not a single key = value"},
		{"[[--set]]\narg = \"x\"\ndoc = \"[t]\\n\"\n", "not a single key = value"},
	} {
		doc := "schema = 1\n" + tt.tail
		err := DecodeSection("p.toml", []byte(doc), "flush", new(pluginConfig))
		var pe *Error
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &pe) {
			t.Errorf("%q: %v, want an *Error containing %q", tt.tail, err, tt.want)
		}
	}
}

func TestWithOverrides(t *testing.T) {
	doc := []byte("a = 1 # no newline at the end")
	out := WithOverrides(doc, []Override{{Arg: `s=x"y`, Doc: []byte("s = \"x\\\"y\"\n")}, ov("n=2")})
	if string(doc) != "a = 1 # no newline at the end" {
		t.Errorf("WithOverrides modified its input: %q", doc)
	}
	src, err := NewSource("p.toml", out, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got, err := src.overrides()
	if err != nil || len(got) != 2 || got[0].src.Override() != `s=x"y` || !reflect.DeepEqual(got[0].path, []string{"s"}) ||
		string(got[0].src.doc) != "s = \"x\\\"y\"\n" || got[1].src.Override() != "n=2" {
		t.Errorf("round trip: err %v, %+v\n%s", err, got, out)
	}
	if b := WithOverrides(doc, nil); string(b) != string(doc) || &b[0] == &doc[0] {
		t.Errorf("no overrides: want a copy of the document, got %q", b)
	}
}

// TestWithOverridesKeepsPositions: appending overrides moves no key of the
// document.
func TestWithOverridesKeepsPositions(t *testing.T) {
	out := WithOverrides([]byte(profileDoc), []Override{ov("flush.config.mode=1"), ov("x.y=2")})
	for _, key := range []string{"schema", "store.segment_size", "store.whatever.x", "flush.config.interval", "flush.config.retry.backoff", "index.config.unknown_to_flush"} {
		l1, c1, ok1 := KeyPosition([]byte(profileDoc), key)
		l2, c2, ok2 := KeyPosition(out, key)
		if !ok1 || l1 != l2 || c1 != c2 || ok1 != ok2 {
			t.Errorf("%s: %d:%d %v before, %d:%d %v after", key, l1, c1, ok1, l2, c2, ok2)
		}
	}
}

// TestDecodeSectionProperty writes random configs, each key either in the
// file (in one of several forms) or as an override, and checks that they
// decode to the values written.
func TestDecodeSectionProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := defaults()
		var file, ovs []string
		put := func(key, val string) {
			if rapid.Bool().Draw(t, "override "+key) {
				ovs = append(ovs, "flush.config."+key+"="+val)
			} else {
				file = append(file, key+" = "+val)
			}
		}
		if rapid.Bool().Draw(t, "set interval") {
			d := time.Duration(rapid.Int64Range(0, 1<<40).Draw(t, "interval"))
			want.Interval = Duration(d)
			put("interval", `"`+Duration(d).String()+`"`)
		}
		if rapid.Bool().Draw(t, "set buffer") {
			n := rapid.Int64Range(0, 1<<50).Draw(t, "buffer")
			want.Buffer = Size(n)
			if rapid.Bool().Draw(t, "buffer as string") {
				put("buffer", `"`+Size(n).String()+`"`)
			} else {
				put("buffer", fmt.Sprint(n))
			}
		}
		if rapid.Bool().Draw(t, "set threshold") {
			pct := rapid.IntRange(0, 100).Draw(t, "threshold")
			want.Threshold = Ratio(float64(pct) / 100)
			put("threshold", fmt.Sprintf(`"%d%%"`, pct))
		}
		if rapid.Bool().Draw(t, "set mode") {
			s := rapid.StringMatching(`[a-z "\\\t]{0,8}`).Draw(t, "mode")
			want.Mode = s
			put("mode", Quote(s))
		}
		if rapid.Bool().Draw(t, "set max") {
			n := rapid.IntRange(-1000, 1000).Draw(t, "max")
			want.Retry.Max = n
			put("retry.max", fmt.Sprint(n))
		}
		doc := "schema = 1\n[store]\ndir = \"d\"\n[flush]\nplugin = \"p\"\n"
		if len(file) > 0 {
			doc += "[flush.config]\n" + strings.Join(file, "\n") + "\n"
		}
		var overrides []Override
		for _, a := range ovs {
			overrides = append(overrides, ov(a))
		}
		got := defaults()
		if err := DecodeSection("p.toml", WithOverrides([]byte(doc), overrides), "flush", &got); err != nil {
			t.Fatalf("%v\n%s%v", err, doc, ovs)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v\n%s%v", got, want, doc, ovs)
		}
	})
}

func TestSource(t *testing.T) {
	doc := []byte("schema = 1\n[store]\nsegment_size = \"1GiB\"\n[flush.config]\ninterval = \"1s\"\n")
	s, err := NewSource("p.toml", doc, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.File() != "p.toml" || s.Override() != "" {
		t.Errorf("File %q, Override %q", s.File(), s.Override())
	}
	if !s.Has([]string{"flush"}) || !s.Has([]string{"flush", "config", "interval"}) || s.Has([]string{"index"}) {
		t.Error("Has is wrong")
	}
	if n, ok := s.Order([]string{"store", "segment_size"}); !ok || n != 2 {
		t.Errorf("Order(store.segment_size) = %d %v, want 2", n, ok)
	}
	if n, ok := s.Order([]string{"flush"}); !ok || n != 3 {
		t.Errorf("Order(flush) = %d %v, want 3", n, ok)
	}
	if l, c, ok := s.ValuePos([]string{"store", "segment_size"}); !ok || l != 3 || c != 16 {
		t.Errorf("ValuePos = %d:%d %v, want 3:16", l, c, ok)
	}
	if l, c, ok := s.ValuePos([]string{"flush"}); !ok || l != 4 || c != 2 {
		t.Errorf("ValuePos(flush) = %d:%d %v, want 4:2", l, c, ok)
	}
	for path, want := range map[string]Value{
		"schema":             {Line: 1, Col: 10, Kind: "integer", Text: "1"},
		"store.segment_size": {Line: 3, Col: 16, Kind: "string", Text: "1GiB"},
		"store":              {Line: 2, Col: 2, Kind: "table"},
	} {
		p, _ := ParseKey(path)
		v, ok := s.Lookup(p)
		v.kind = 0
		if !ok || v != want {
			t.Errorf("Lookup(%s) = %+v %v, want %+v", path, v, ok, want)
		}
	}
	if v, _ := s.Lookup([]string{"schema"}); v.Describe() != "an integer" {
		t.Errorf("Describe = %q", v.Describe())
	}
	if _, ok := s.Lookup([]string{"flush"}); ok {
		t.Error("Lookup(flush) found a key only dotted keys define")
	}

	// Decode of a whole document, strictly.
	var whole struct {
		Schema int `toml:"schema"`
		Store  struct {
			SegmentSize Size `toml:"segment_size"`
		} `toml:"store"`
	}
	errs := s.Decode(&whole, nil)
	want := "p.toml:4:2: flush: unknown key; allowed at top level: schema, store"
	if errs.Err() == nil || errs.Err().Error() != want {
		t.Errorf("Decode: %v, want %s", errs.Err(), want)
	}
	if whole.Schema != 1 || whole.Store.SegmentSize != 1<<30 {
		t.Errorf("decoded %+v", whole)
	}

	// An override's errors name it.
	o, err := NewSource("p.toml", []byte("store.segment_size = \"big\"\n"), "store.segment_size=big")
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() any { return reflect.New(reflect.TypeOf(whole)).Interface() }
	err = o.Decode(&whole, fresh).Err()
	if want := `p.toml: --set store.segment_size=big: store.segment_size: invalid size "big" (want e.g. "512KiB", "4MiB", "1GiB" or a whole number of bytes)`; err == nil || err.Error() != want {
		t.Errorf("override: %v\nwant %s", err, want)
	}

	// A syntax error is an *Error at its place, and no Source.
	bad, err := NewSource("p.toml", []byte("a = 1\nb = [\n"), "")
	var pe *Error
	if bad != nil || !errors.As(err, &pe) || pe.Line != 2 || pe.Col != 6 || pe.Msg != "syntax error: array is incomplete" {
		t.Errorf("syntax error: %v %#v", bad, err)
	}
}

func TestErrorList(t *testing.T) {
	var none ErrorList
	if none.Err() != nil {
		t.Error("empty list is an error")
	}
	a := &Error{File: "f", Line: 2, Col: 1, Key: "a", Msg: "x"}
	b := &Error{File: "f", Key: "b", Msg: "y"}
	c := &Error{File: "f", Line: 1, Col: 5, Override: "k=v", Key: "c", Msg: "z"}
	if (ErrorList{a}).Err() != a {
		t.Error("a list of one is not its *Error")
	}
	l := ErrorList{b, a, c}
	l.Sort()
	if l[0] != c || l[1] != a || l[2] != b {
		t.Errorf("sorted: %v", l)
	}
	if got := l.Err().Error(); got != "f:1:5: --set k=v: c: z\nf:2:1: a: x\nf: b: y" {
		t.Errorf("text: %q", got)
	}
	var pe *Error
	if !errors.As(l.Err(), &pe) || pe != c {
		t.Error("errors.As does not find the first *Error")
	}
}

func TestKeyPosition(t *testing.T) {
	doc := []byte("a = 1\n[b]\n  c.d = { e = 2 }\n[[f]]\ng = 3\n")
	for key, want := range map[string][3]int{
		"a": {1, 1, 1}, "b": {2, 2, 1}, "b.c": {3, 3, 1}, "b.c.d": {3, 5, 1}, "b.c.d.e": {3, 11, 1}, "f.g": {5, 1, 1},
		"x": {0, 0, 0}, "b..c": {0, 0, 0}, "": {0, 0, 0},
	} {
		l, c, ok := KeyPosition(doc, key)
		if l != want[0] || c != want[1] || ok != (want[2] == 1) {
			t.Errorf("KeyPosition(%q) = %d:%d %v, want %v", key, l, c, ok, want)
		}
	}
}

func TestParseFormatKey(t *testing.T) {
	for in, want := range map[string][]string{
		"a":               {"a"},
		"a.b-c.d_e":       {"a", "b-c", "d_e"},
		` a . "b.c" `:     {"a", "b.c"},
		`'x y'.z`:         {"x y", "z"},
		`"\u00e9"."q\"t"`: {"é", `q"t`},
	} {
		got, err := ParseKey(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", in, got, err, want)
		}
		if back, err := ParseKey(FormatKey(got)); err != nil || !reflect.DeepEqual(back, want) {
			t.Errorf("ParseKey(FormatKey(%q)) = %q, %v", got, back, err)
		}
	}
	for _, in := range []string{"", "a.", ".a", "a..b", "a = 1", "a\nb", "[a]"} {
		if got, err := ParseKey(in); err == nil {
			t.Errorf("ParseKey(%q) = %q, want an error", in, got)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		path := rapid.SliceOfN(rapid.String(), 1, 4).Draw(t, "path")
		got, err := ParseKey(FormatKey(path))
		if err != nil {
			t.Fatalf("FormatKey(%q) = %s does not parse: %v", path, FormatKey(path), err)
		}
		for i := range path {
			path[i] = strings.ToValidUTF8(path[i], "\uFFFD")
		}
		if !reflect.DeepEqual(got, path) {
			t.Fatalf("FormatKey(%q) = %s parses to %q", path, FormatKey(path), got)
		}
	})
}

// TestUnknownHeader: an unknown table header is reported at its first
// unknown part, once.
func TestUnknownHeader(t *testing.T) {
	var whole struct {
		Store struct {
			Dir string `toml:"dir"`
		} `toml:"store"`
	}
	s, err := NewSource("p.toml", []byte("[store]\ndir = \"d\"\n[nope.a]\n[nope.b]\n[store.x.y]\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := "p.toml:3:2: nope: unknown key; allowed at top level: store\np.toml:5:8: store.x: unknown key; allowed in [store]: dir"
	if err := s.Decode(&whole, nil).Err(); err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestDecodeSectionInlineUnknownKey: an unknown key inside an inline table
// is refused with its position, as in a [section.config] table (go-toml's
// strict mode alone does not look inside inline tables).
func TestDecodeSectionInlineUnknownKey(t *testing.T) {
	type C struct {
		Interval string `toml:"interval"`
	}
	for doc, want := range map[string]string{
		"[flush]\nconfig = { nope = 1 }\n":                 "x.toml:2:12: flush.config.nope: unknown key; allowed in [flush.config]: interval",
		"flush = { config = { nope = 1 } }\n":              "x.toml:1:22: flush.config.nope: unknown key; allowed in [flush.config]: interval",
		"[flush]\nconfig = { interval = \"1s\", x = 2 }\n": "x.toml:2:29: flush.config.x: unknown key; allowed in [flush.config]: interval",
	} {
		var c C
		err := DecodeSection("x.toml", []byte(doc), "flush", &c)
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %s", doc, err, want)
		}
	}
	var c C
	if err := DecodeSection("x.toml", []byte("[flush]\nconfig = { interval = \"1s\" }\n"), "flush", &c); err != nil || c.Interval != "1s" {
		t.Errorf("a known key in an inline table: %v, %+v", err, c)
	}
}

// TestDecodeInlineTablePath: an unknown key inside a top-level inline
// table is named by its full path (go-toml names it without the table).
func TestDecodeInlineTablePath(t *testing.T) {
	type Doc struct {
		Store struct {
			Dir string `toml:"dir"`
		} `toml:"store"`
	}
	src, err := NewSource("x.toml", []byte("store = { dir = \"d\", nope = 1 }\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	var d Doc
	errs := src.Decode(&d, func() any { return new(Doc) })
	if want := "x.toml:1:22: store.nope: unknown key; allowed in [store]: dir"; errs.Err() == nil || errs.Err().Error() != want {
		t.Fatalf("got %v, want %s", errs.Err(), want)
	}
}
