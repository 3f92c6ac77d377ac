package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/profile"
	flush "github.com/keelmq/keel/plugins/flush-strategies"
	indexhash "github.com/keelmq/keel/plugins/index-hash"
	replicationasync "github.com/keelmq/keel/plugins/replication-async"
	"github.com/keelmq/keel/sdk"
)

// testCatalog is the builtins these tests use.
func testCatalog() *Catalog {
	c := &Catalog{}
	c.Add(sdk.KindFlush, "async", func() sdk.Plugin {
		f, err := flush.New("async")
		if err != nil {
			panic(err)
		}
		return f
	})
	c.Add(sdk.KindReplication, "async", func() sdk.Plugin { return replicationasync.New() })
	c.Add(sdk.KindIndex, "hash", func() sdk.Plugin { return indexhash.New() })
	return c
}

// startTestNode starts a node on 127.0.0.1 ports of its own choosing, with
// a store in a temporary directory, async flush and no index; sets are
// more --set overrides. The node is stopped at the end of the test.
func startTestNode(t *testing.T, sets ...string) *Node {
	t.Helper()
	base := []string{
		"server.namesrv_addr=127.0.0.1:0", "server.broker_addr=127.0.0.1:0",
		"server.ha_addr=127.0.0.1:0", "admin.addr=127.0.0.1:0",
		"store.dir=" + t.TempDir(), "store.segment_size=1MiB", "store.max_message_size=64KiB",
		"index.plugin=none", "flush.plugin=async",
		"store.disk_max_used_ratio=0.97", "store.disk_clean_forcibly_ratio=0.98", "store.disk_warning_ratio=0.99",
	}
	p, err := profile.LoadBytes("test.toml", []byte("schema = 1\n"), append(base, sets...))
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(context.Background(), p, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Catalog: testCatalog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	return n
}

// adminDo sends one request to the node's admin API and returns the status
// and body.
func adminDo(t *testing.T, n *Node, method, path string, hdr map[string]string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, "http://"+n.Addr("admin")+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func statusOf(t *testing.T, n *Node) map[string]any {
	t.Helper()
	code, body := adminDo(t, n, http.MethodGet, "/status", nil)
	var st map[string]any
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("/status: %d %s", code, body)
	}
	return st
}

// TestAdminMutationsRefuseBrowserRequests: a slave whose master is away
// is not promoted by what a web page can send (a cross-origin Origin, a
// cross-site Sec-Fetch-Site, a text/plain or form body); each refusal is
// 403 or 415 with a JSON error; a same-origin JSON request (what `keel
// admin` sends) promotes it.
func TestAdminMutationsRefuseBrowserRequests(t *testing.T) {
	// The master: a port that takes connections and never answers.
	master, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	n := startTestNode(t, "replication.plugin=async", "replication.role=slave",
		"replication.master_addr="+master.Addr().String(), "replication.secret=s")
	self := n.Addr("admin")
	port := self[strings.LastIndex(self, ":")+1:]
	const ctJSON = "application/json"
	refused := []struct {
		name string
		hdr  map[string]string
		code int
	}{
		{"evil origin, text/plain (the reported request)", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403},
		{"evil origin, JSON", map[string]string{"Origin": "http://evil.example", "Content-Type": ctJSON}, 403},
		{"evil origin on our port (DNS rebinding)", map[string]string{"Origin": "http://evil.example:" + port, "Content-Type": ctJSON}, 403},
		{"other local port", map[string]string{"Origin": "http://127.0.0.1:1", "Content-Type": ctJSON}, 403},
		{"https origin", map[string]string{"Origin": "https://" + self, "Content-Type": ctJSON}, 403},
		{"null origin", map[string]string{"Origin": "null", "Content-Type": ctJSON}, 403},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": ctJSON}, 403},
		{"same-site fetch", map[string]string{"Sec-Fetch-Site": "same-site", "Content-Type": ctJSON}, 403},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, 415},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"no content type", nil, 415},
		{"same origin, text/plain", map[string]string{"Origin": "http://" + self, "Content-Type": "text/plain"}, 415},
	}
	for _, path := range []string{"/admin/promote", "/admin/force-writes"} {
		for _, c := range refused {
			code, body := adminDo(t, n, http.MethodPost, path, c.hdr)
			var e struct{ Error string }
			if code != c.code || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
				t.Errorf("%s %s: %d %s, want %d with a JSON error", path, c.name, code, body, c.code)
			}
		}
	}
	if role := statusOf(t, n)["role"]; role != "slave" {
		t.Fatalf("a refused request changed the role to %v", role)
	}
	// What `keel admin promote` sends, from the same origin or none.
	code, body := adminDo(t, n, http.MethodPost, "/admin/promote", map[string]string{
		"Origin": "http://" + self, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json; charset=utf-8"})
	if code != http.StatusOK {
		t.Fatalf("same-origin JSON promote: %d %s", code, body)
	}
	if role := statusOf(t, n)["role"]; role != "master" {
		t.Fatalf("after promote the role is %v", role)
	}
}

func TestSameOrigin(t *testing.T) {
	lo := netip.MustParseAddrPort("127.0.0.1:10914")
	wild := netip.MustParseAddrPort("0.0.0.0:10914")
	for _, c := range []struct {
		origin string
		self   netip.AddrPort
		want   bool
	}{
		{"http://127.0.0.1:10914", lo, true},
		{"http://localhost:10914", lo, true},
		{"http://LOCALHOST:10914", lo, true},
		{"http://127.0.0.1:10915", lo, false},
		{"http://127.0.0.1", lo, false},
		{"http://10.1.2.3:10914", lo, false},
		{"http://10.1.2.3:10914", wild, true},
		{"http://[::1]:10914", wild, true},
		{"http://broker.example:10914", wild, false},
		{"https://127.0.0.1:10914", lo, false},
		{"http://127.0.0.1:10914/x", lo, false},
		{"null", lo, false},
		{"", lo, false},
	} {
		if got := sameOrigin(c.origin, c.self); got != c.want {
			t.Errorf("sameOrigin(%q, %s) = %v, want %v", c.origin, c.self, got, c.want)
		}
	}
}

// TestAdminServesNoSecret: with the HA secret given on the command line
// and in the profile, nothing the admin API serves shows it; the pprof
// command line shows the key with its value redacted.
func TestAdminServesNoSecret(t *testing.T) {
	const secret = "hunter2-very-secret"
	old := os.Args
	os.Args = []string{"keel", "serve", "--set", "replication.secret=" + secret, "--set=replication.secret=" + secret,
		"-set", `replication."secret"=` + secret, "--set", "store.segment_size=1MiB"}
	defer func() { os.Args = old }()
	n := startTestNode(t, "replication.plugin=async", "replication.secret="+secret)
	for _, path := range []string{"/status", "/metrics", "/debug/pprof/cmdline", "/debug/pprof/", "/debug/pprof/goroutine?debug=1"} {
		code, body := adminDo(t, n, http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Errorf("%s: %d", path, code)
		}
		if strings.Contains(body, secret) {
			t.Errorf("%s shows the secret:\n%s", path, body)
		}
	}
	_, cmdline := adminDo(t, n, http.MethodGet, "/debug/pprof/cmdline", nil)
	want := strings.Join([]string{"keel", "serve", "--set", "replication.secret=(redacted)", "--set=replication.secret=(redacted)",
		"-set", `replication."secret"=(redacted)`, "--set", "store.segment_size=1MiB"}, "\x00")
	if cmdline != want {
		t.Errorf("cmdline %q\nwant    %q", cmdline, want)
	}
}

// damageRecord flips one bit of the committed record at off, on disk, under the
// running store, as bit rot in an old segment would.
func damageRecord(t *testing.T, n *Node, off, at int64) {
	t.Helper()
	seg := int64(n.prof.Store.SegmentSize)
	path := filepath.Join(n.prof.Store.Dir, core.CommitlogDir, fmt.Sprintf("%020d", off/seg*seg))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off%seg+at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off%seg+at); err != nil {
		t.Fatal(err)
	}
}

// TestAdminMessageDamaged: /message?id= for a damaged record answers 500
// with an error naming the damage and the offset, never 200 with an empty
// message; an intact record still answers 200.
func TestAdminMessageDamaged(t *testing.T) {
	n := startTestNode(t)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	var offs []int64
	for i := 0; i < 3; i++ {
		r, err := n.Store().Append(&record.Message{Topic: "T", Body: []byte(fmt.Sprintf("body-%d", i)), BornHost: host, StoreHost: host, BornTimestamp: 1})
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, r.PhysOffset)
	}
	if _, err := n.Store().Flush(); err != nil {
		t.Fatal(err)
	}
	id := func(i int) string { return "/message?id=" + record.OffsetMsgID(host, offs[i]) }
	if code, body := adminDo(t, n, http.MethodGet, id(0), nil); code != 200 || !strings.Contains(body, `"body-0"`) {
		t.Fatalf("intact record: %d %s", code, body)
	}
	damageRecord(t, n, offs[0], 89) // in the body: the CRC fails
	damageRecord(t, n, offs[1], 1)  // in TOTALSIZE
	for i, what := range []string{"CRC", "TOTALSIZE"} {
		code, body := adminDo(t, n, http.MethodGet, id(i), nil)
		var e struct {
			Error  string
			Offset int64
		}
		if code != http.StatusInternalServerError || json.Unmarshal([]byte(body), &e) != nil ||
			!strings.Contains(e.Error, fmt.Sprintf("damaged record at offset %d", offs[i])) || !strings.Contains(e.Error, what) || e.Offset != offs[i] {
			t.Errorf("record damaged in its %s: %d %s", what, code, body)
		}
	}
	if code, body := adminDo(t, n, http.MethodGet, id(2), nil); code != 200 || !strings.Contains(body, `"body-2"`) {
		t.Fatalf("intact record after the damaged ones: %d %s", code, body)
	}
}

// TestStatusWritableAndDispatchLag: /status reports the store's own
// Writable error (here: closed) rather than "yes", and dispatch_lag_bytes
// is committed minus dispatched.
func TestStatusWritableAndDispatchLag(t *testing.T) {
	n := startTestNode(t)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	if _, err := n.Store().Append(&record.Message{Topic: "T", Body: []byte("x"), BornHost: host, StoreHost: host}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := statusOf(t, n)
		offs := st["offsets"].(map[string]any)
		lag, ok := st["dispatch_lag_bytes"].(float64)
		if !ok {
			t.Fatalf("/status has no dispatch_lag_bytes: %v", st)
		}
		if st["writable"] != "yes" {
			t.Fatalf("a healthy store is not writable: %v", st["writable"])
		}
		if lag == offs["committed"].(float64)-offs["dispatched"].(float64) && lag == 0 {
			break
		}
		if lag < 0 || lag > offs["committed"].(float64) || time.Now().After(deadline) {
			t.Fatalf("dispatch_lag_bytes %v with offsets %v", lag, offs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.Store().Close()
	w, _ := statusOf(t, n)["writable"].(string)
	if want := core.ErrClosed.Error(); !strings.Contains(w, want) {
		t.Fatalf("writable %q with the store closed, want the store's error %q", w, want)
	}
}

// TestMetricsRequestBudget: /metrics carries the request memory budget.
func TestMetricsRequestBudget(t *testing.T) {
	n := startTestNode(t)
	_, m := adminDo(t, n, http.MethodGet, "/metrics", nil)
	for _, want := range []string{"keel_remoting_request_buffered_bytes ", "keel_remoting_request_budget_waits_total 0",
		"keel_remoting_request_budget_refused_total 0", "keel_remoting_request_buffered_peak_bytes "} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(m, "keel_remoting_request_budget_bytes ") {
		t.Errorf("/metrics lacks the budget")
	}
}

// TestMetricsRecoveryTail: the recovery bound, write stalls, forced
// retention and the last recovery are on /metrics, the bound at the
// profile's default.
func TestMetricsRecoveryTail(t *testing.T) {
	n := startTestNode(t)
	_, m := adminDo(t, n, http.MethodGet, "/metrics", nil)
	for _, want := range []string{
		"keel_recovery_tail_unflushed_bytes ", "keel_recovery_tail_undispatched_bytes ",
		fmt.Sprintf("keel_recovery_tail_bound_bytes %d\n", n.store.RecoveryTailBound()),
		"keel_write_stalls_total 0", "keel_write_stall_seconds_total 0", "keel_write_stall_timeouts_total 0",
		"keel_retention_forced_deletions_total 0", "keel_recovery_seconds ", "keel_recovery_scanned_bytes ",
		"keel_recovery_redispatch_bytes ",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if n.store.RecoveryTailBound() <= 0 {
		t.Errorf("the default profile runs without a recovery bound (%d)", n.store.RecoveryTailBound())
	}
}
