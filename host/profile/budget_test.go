package profile

import (
	"strings"
	"testing"
)

// TestRequestBufferBudget: server.request_buffer_budget defaults to
// 256MiB, follows a larger max_frame_size when not set, and an explicit
// budget smaller than max_frame_size is refused on the key set last.
func TestRequestBufferBudget(t *testing.T) {
	if p := mustLoad(t, "schema = 1\n"); p.Server.RequestBufferBudget != 256<<20 {
		t.Errorf("default budget %s, want 256MiB", p.Server.RequestBufferBudget)
	}
	p := mustLoad(t, "schema = 1\n[server]\nmax_frame_size = \"512MiB\"\n")
	if p.Server.RequestBufferBudget != 512<<20 {
		t.Errorf("budget %s with a 512MiB max frame, want 512MiB", p.Server.RequestBufferBudget)
	}
	if p := mustLoad(t, "schema = 1\n", "server.request_buffer_budget=1GiB"); p.Server.RequestBufferBudget != 1<<30 {
		t.Errorf("budget %s, want the 1GiB set", p.Server.RequestBufferBudget)
	}
	for _, c := range []struct {
		doc  string
		sets []string
		key  string
	}{
		{"schema = 1\n[server]\nrequest_buffer_budget = \"8MiB\"\n", nil, "server.request_buffer_budget"},
		{"schema = 1\n[server]\nrequest_buffer_budget = \"32MiB\"\n", []string{"server.max_frame_size=64MiB"}, "server.max_frame_size"},
	} {
		_, err := LoadBytes("profiles/x.toml", []byte(c.doc), c.sets)
		if err == nil || !strings.Contains(err.Error(), c.key+":") || !strings.Contains(err.Error(), "larger than the budget") {
			t.Errorf("%q %v: error %v, want one on %s", c.doc, c.sets, err, c.key)
		}
	}
}
