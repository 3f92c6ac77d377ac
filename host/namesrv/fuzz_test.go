package namesrv

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// bodySeeds are the committed seeds of FuzzRegisterBody (written to
// testdata/fuzz by go test -run Seeds -update).
func bodySeeds() map[string]struct {
	data       []byte
	compressed bool
} {
	keel, _ := encodeRegisterBody(registerBody{topics: topics(topic("T", 4))}, false)
	keelZ, _ := encodeRegisterBody(registerBody{topics: topics(topic("T", 4), topic("U", 2)), filterServers: []string{"f:1"}}, true)
	return map[string]struct {
		data       []byte
		compressed bool
	}{
		"java5-json": {[]byte(javaBody5), false},
		"java5-zlib": {zlibBody([]string{"TBW102 8 8 7 SINGLE_TAG {}", `TopicTest 4 4 6 SINGLE_TAG {"a b":"c"}`}, true), true},
		"java4-zlib": {zlibBody([]string{"TopicTest 4 4 6 SINGLE_TAG"}, false), true},
		"keel-json":  {keel, false},
		"keel-zlib":  {keelZ, true},
		"empty":      {nil, false},
	}
}

func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("writes the seeds only with -update")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzRegisterBody")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range bodySeeds() {
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%t)\n", s.data, s.compressed)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir = filepath.Join("testdata", "fuzz", "FuzzTopicLine")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, line := range map[string]string{"v4": "T 4 4 6 SINGLE_TAG", "v5": `T 8 8 6 MULTI_TAG {"k":"v w"}`, "short": "T 1"} {
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\nstring(%q)\n", line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzRegisterBody: decoding never panics, and whatever decodes survives
// a JSON re-encoding unchanged.
func FuzzRegisterBody(f *testing.F) {
	for _, s := range bodySeeds() {
		f.Add(s.data, s.compressed)
	}
	f.Fuzz(func(t *testing.T, data []byte, compressed bool) {
		b, err := decodeRegisterBody(data, compressed)
		if err != nil {
			return
		}
		enc, err := encodeRegisterBody(b, false)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", b, err)
		}
		back, err := decodeRegisterBody(enc, false)
		if err != nil {
			t.Fatalf("decoding the re-encoding %s: %v", enc, err)
		}
		if len(b.filterServers) == 0 {
			b.filterServers = []string{}
		}
		if !reflect.DeepEqual(back.topics, b.topics) || back.version != b.version || !slices.Equal(back.filterServers, b.filterServers) {
			t.Fatalf("round trip\n got %+v\nwant %+v", back, b)
		}
	})
}

// FuzzTopicLine: a line that decodes to a valid topic is written back in
// a form that decodes to the same topic.
func FuzzTopicLine(f *testing.F) {
	f.Add("T 4 4 6 SINGLE_TAG")
	f.Fuzz(func(t *testing.T, line string) {
		tc, err := decodeTopicLine(line)
		if err != nil || tc.Validate() != nil {
			return
		}
		back, err := decodeTopicLine(encodeTopicLine(tc))
		if err != nil || back != tc {
			t.Fatalf("%q → %+v → %q → %+v, %v", line, tc, encodeTopicLine(tc), back, err)
		}
	})
}
