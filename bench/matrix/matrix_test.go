package matrix

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func repoConfig(t *testing.T, name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "configs", "bench", name)
}

func TestShippedConfigs(t *testing.T) {
	for name, bodies := range map[string][]int{"quick.toml": {128}, "full.toml": {128, 4096}, "core.toml": {128, 4096}} {
		c, err := Load(repoConfig(t, name), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(c.Cells()) == 0 || c.Repeats < 3 {
			t.Fatalf("%s: %d cells, %d repeats", name, len(c.Cells()), c.Repeats)
		}
		if !slices.Equal(c.Recovery.BodyBytes, bodies) {
			t.Errorf("%s: recovery.body_bytes %v, want %v", name, c.Recovery.BodyBytes, bodies)
		}
		if q := c.Quick(); len(q.Recovery.BodyBytes) != 1 || q.Recovery.BodyBytes[0] != 128 {
			t.Errorf("%s --quick: recovery.body_bytes %v, want [128]", name, q.Recovery.BodyBytes)
		}
	}
	q, _ := Load(repoConfig(t, "quick.toml"), nil)
	if est := q.Quick().Estimate(); est > 2*time.Minute {
		t.Errorf("quick matrix estimate %v leaves no room for setup in 3 minutes", est)
	}
	f, _ := Load(repoConfig(t, "full.toml"), nil)
	if est := f.Estimate(); est > 20*time.Minute {
		t.Errorf("full matrix estimate %v leaves no room for setup in 30 minutes", est)
	}
}

const minimal = `schema = 1
[[matrix]]
flush = ["sync", "async"]
producers = [1, 64]
`

func TestDefaultsAndCells(t *testing.T) {
	c, err := Parse("configs/bench/x.toml", []byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "x" || c.Duration.D() != 2*time.Second || c.Repeats != 3 || c.Queues != 8 || c.SegmentSize != 128<<20 {
		t.Fatalf("defaults: %+v", c)
	}
	cells := c.Cells()
	if len(cells) != 4 {
		t.Fatalf("cells: %v", cells)
	}
	if cells[0].Key() != "produce/sync/none/none/builtin/128B/p1" {
		t.Errorf("first cell %s", cells[0].Key())
	}
	if got := c.Ceiling.Producers; len(got) != 2 || got[0] != 1 || got[1] != 64 {
		t.Errorf("ceiling producers default to the matrix's: %v", got)
	}
	if c.Peers.Duration != c.Duration || c.Peers.Repeats != 3 {
		t.Errorf("peers inherit duration/repeats: %+v", c.Peers)
	}
}

func TestCellsDeduplicatedAcrossBlocks(t *testing.T) {
	doc := minimal + `
[[matrix]]
flush = ["sync"]
producers = [64, 256]
`
	c, err := Parse("a.toml", []byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Cells()); n != 5 {
		t.Fatalf("want 4 + 1 new cells, got %d: %v", n, c.Cells())
	}
}

func TestStrictErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown top key", "schema = 1\nfoo = 2\n", `a.toml:2:1: unknown key "foo"`},
		{"unknown block key", "schema = 1\n[[matrix]]\nflsh = [\"sync\"]\n", `unknown key "matrix.flsh"`},
		{"unknown section", "schema = 1\n[cieling]\nduration = \"1s\"\n", `unknown key "cieling`},
		{"wrong type", "schema = 1\nrepeats = \"three\"\n", "a.toml:2:"},
		{"bad duration", "schema = 1\nduration = \"5 parsecs\"\n", "invalid duration"},
		{"bad size", "schema = 1\nsegment_size = \"12 furlongs\"\n", "invalid size"},
		{"schema", "schema = 2\n", "schema: got 2"},
		{"no schema", "name = \"x\"\n", "schema: got 0"},
		{"repeats", "schema = 1\nrepeats = 2\n", "at least 3"},
		{"flush value", "schema = 1\n[[matrix]]\nflush = [\"sometimes\"]\n", `"sometimes" is not one of`},
		{"producers", "schema = 1\n[[matrix]]\nproducers = [0]\n", "producers: 0 outside"},
		{"crash kind", "schema = 1\n[recovery]\ncrashes = [\"meteor\"]\n", `"meteor"`},
		{"peer", "schema = 1\n[peers]\nnats = [\"r5\"]\n", `"r5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("a.toml", []byte(tc.doc), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestSizeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := Size(rapid.Int64Range(0, 1<<50).Draw(t, "n"))
		s := n.String()
		back, err := ParseSize(s)
		if err != nil || back != n {
			t.Fatalf("%d -> %q -> %d, %v", n, s, back, err)
		}
	})
	for in, want := range map[string]Size{"4096": 4096, "64KiB": 64 << 10, "1 GiB": 1 << 30, "10B": 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "-1", "1.5GiB", "1PiB", "99999999999TiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) should fail", in)
		}
	}
}

func TestQuick(t *testing.T) {
	doc := "schema = 1\nduration = \"10s\"\nrepeats = 5\n[recovery]\nsizes = [\"256MiB\", \"16MiB\", \"64MiB\"]\nbody_bytes = [4096, 128, 1024]\nrepeats = 3\n[[matrix]]\nflush = [\"sync\"]\n"
	c, err := Parse("a.toml", []byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	q := c.Quick()
	if q.Duration.D() != time.Second || q.Repeats != 3 || len(q.Recovery.Sizes) != 2 || q.Recovery.Sizes[1] != 64<<20 || q.Recovery.Repeats != 1 {
		t.Fatalf("quick: %+v", q)
	}
	if len(q.Recovery.BodyBytes) != 1 || q.Recovery.BodyBytes[0] != 128 {
		t.Fatalf("quick keeps the smallest recovery body size only: %v", q.Recovery.BodyBytes)
	}
	if got := q.RecoveryRuns(); got != 2*2*2*1*1 {
		t.Fatalf("quick RecoveryRuns = %d, want 8 (2 sizes, 2 crashes, 2 flushes, 1 body, 1 repeat)", got)
	}
	if c.Duration.D() != 10*time.Second || len(c.Recovery.Sizes) != 3 || len(c.Recovery.BodyBytes) != 3 || c.Recovery.BodyBytes[0] != 4096 {
		t.Fatal("Quick modified the original")
	}
	if got := c.RecoveryRuns(); got != 3*2*2*3*3 {
		t.Fatalf("RecoveryRuns = %d, want 108", got)
	}
}

// TestRecoveryBodyBytes: a list, a plain integer (the format before it
// was a list) and the default; bad values name the key.
func TestRecoveryBodyBytes(t *testing.T) {
	for doc, want := range map[string][]int{
		"":                           {128},
		"body_bytes = 4096\n":        {4096},
		"body_bytes = [128, 4096]\n": {128, 4096},
		"body_bytes = [ 128, # small\n 4096, ]\n": {128, 4096},
		"body_bytes = []\n":                       {128},
	} {
		c, err := Parse("a.toml", []byte("schema = 1\n[recovery]\n"+doc+"repeats = 2\n"), nil)
		if err != nil {
			t.Errorf("%q: %v", doc, err)
			continue
		}
		if !slices.Equal(c.Recovery.BodyBytes, want) || c.Recovery.Repeats != 2 {
			t.Errorf("%q: body_bytes %v, repeats %d; want %v, 2", doc, c.Recovery.BodyBytes, c.Recovery.Repeats, want)
		}
	}
	for doc, want := range map[string]string{
		"body_bytes = \"128\"\n":                            `recovery.body_bytes: want a list of integers`,
		"body_bytes = [128, \"4KiB\"]\n":                    `recovery.body_bytes: want a list of integers`,
		"body_bytes = [1.5]\n":                              `recovery.body_bytes: want a list of integers`,
		"body_bytes = [0]\n":                                "recovery.body_bytes: 0 outside",
		"body_bytes = 99999999999\n":                        "recovery.body_bytes: 99999999999 outside",
		"body_bytes = [128, 128]\n":                         "lists a size twice",
		"segment_size = \"1MiB\"\nbody_bytes = [1048576]\n": "does not fit recovery.segment_size",
	} {
		_, err := Parse("a.toml", []byte("schema = 1\n[recovery]\n"+doc), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", doc, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"quick.toml", "full.toml", "core.toml"} {
		if b, err := os.ReadFile(repoConfig(nil, name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(minimal))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Parse("f.toml", doc, nil)
		if err != nil {
			return
		}
		if err := c.Validate(DefaultCatalog()); err != nil {
			t.Fatalf("Parse accepted a config Validate rejects: %v", err)
		}
		for _, cell := range c.Cells() {
			if cell.Producers < 1 || cell.BodyBytes < 1 {
				t.Fatalf("invalid cell %+v", cell)
			}
		}
	})
}

func TestWireSection(t *testing.T) {
	c, err := Parse("x.toml", []byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.WireRuns() != 0 || len(c.Wire.Profiles) != 0 {
		t.Fatalf("no [wire] section must mean no wire runs: %+v", c.Wire)
	}
	doc := "duration = \"3s\"\n" + minimal + `[wire]
profiles = ["default", "sync-flush"]
producers = [1, 64]
`
	c, err = Parse("x.toml", []byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Wire
	if w.Connections != 8 || w.Depth != 32 || len(w.BodyBytes) != 1 || w.BodyBytes[0] != 128 || w.SegmentSize != 256<<20 ||
		w.Duration.D() != 3*time.Second || w.Repeats != 3 || !w.WithNATS() || !w.WithFloor() {
		t.Fatalf("defaults: %+v", w)
	}
	if got := c.WireRuns(); got != 5*2*1*3 {
		t.Fatalf("WireRuns = %d, want 30 (2 profiles + NATS in-process + NATS over TCP + the protocol floor, 2 producer counts, 3 repeats)", got)
	}
	if q := c.Quick(); q.Wire.Duration.D() != time.Second || q.Wire.Repeats != 3 {
		t.Fatalf("quick: %+v", q.Wire)
	}
	off, err := Parse("x.toml", []byte(doc+"nats = false\nfloor = false\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if off.Wire.WithNATS() || off.Wire.WithFloor() || off.WireRuns() != 2*2*1*3 {
		t.Fatalf("nats = false, floor = false: %v, %v, %d runs", off.Wire.WithNATS(), off.Wire.WithFloor(), off.WireRuns())
	}
	for _, bad := range []string{"connections = -1\n", "depth = 100000\n", "body_bytes = [0]\n", "producers = [5000]\n",
		"profiles = [\"\"]\n", "segment_size = \"4KiB\"\n", "pipeline = 3\n"} {
		if _, err := Parse("x.toml", []byte(minimal+"[wire]\n"+bad), nil); err == nil {
			t.Errorf("[wire] %s accepted", strings.TrimSpace(bad))
		} else if !strings.Contains(err.Error(), "wire") {
			t.Errorf("[wire] %s: error does not name the section: %v", strings.TrimSpace(bad), err)
		}
	}
}
