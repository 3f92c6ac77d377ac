package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/keelmq/keel/internal/builtins"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/host/remoting"
)

const profilesDir = "../../configs/profiles"

// portZero moves every listener of a profile to a free loopback port.
var portZero = []string{
	"server.namesrv_addr=127.0.0.1:0", "server.broker_addr=127.0.0.1:0",
	"server.ha_addr=127.0.0.1:0", "admin.addr=127.0.0.1:0",
	// The shipped pairs register with each other's name server on a
	// fixed port; tests register only with their own.
	"server.namesrv_addrs=[]",
	// Not about disk pressure: a fuller CI disk must not change outcomes.
	"store.disk_max_used_ratio=0.97", "store.disk_clean_forcibly_ratio=0.98", "store.disk_warning_ratio=0.99",
}

var (
	pluginBinsOnce sync.Once
	pluginBinsDir  string
	pluginBinsErr  error
)

// pluginBins builds the external plugin binaries once into a temp dir.
func pluginBins(t testing.TB) string {
	pluginBinsOnce.Do(func() {
		pluginBinsDir, pluginBinsErr = os.MkdirTemp("", "keel-plugins-")
		if pluginBinsErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", pluginBinsDir+"/", "../../plugins/index-hash/cmd/keel-index-hash",
			"../../plugins/flush-strategies/cmd/keel-flush")
		out, err := cmd.CombinedOutput()
		if err != nil {
			pluginBinsErr = fmt.Errorf("build plugins: %v\n%s", err, out)
		}
	})
	if pluginBinsErr != nil {
		t.Fatal(pluginBinsErr)
	}
	return pluginBinsDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pluginBinsDir != "" {
		os.RemoveAll(pluginBinsDir)
	}
	os.Exit(code)
}

// TestShippedProfiles loads and checks every profile in configs/profiles:
// strict decoding, every plugin it names exists and accepts its config,
// and its durability table is complete.
func TestShippedProfiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(profilesDir, "*.toml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("shipped profiles: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sets := []string{"store.dir=" + t.TempDir()}
			if raw, _ := os.ReadFile(f); strings.Contains(string(raw), "keel-index-hash") {
				// External plugins: use the binary this test built.
				sets = append(sets, "index.path="+filepath.Join(pluginBins(t), "keel-index-hash"))
			}
			p, err := profile.Load(f, sets)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := host.Check(context.Background(), p, builtins.Catalog())
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"producer ack sent", "process crash (kill -9)", "power loss", "loss of the master"}
			for i, q := range want {
				if rows[i].Question != q || rows[i].Answer == "" {
					t.Fatalf("durability row %d = %+v, want %q", i, rows[i], q)
				}
			}
		})
	}
	// Master and slave profiles run side by side as shipped.
	for _, pair := range [][2]string{{"async-master.toml", "async-slave.toml"}, {"sync-master.toml", "sync-slave.toml"}} {
		m, _ := profile.Load(filepath.Join(profilesDir, pair[0]), nil)
		s, _ := profile.Load(filepath.Join(profilesDir, pair[1]), nil)
		seen := map[string]string{}
		for _, a := range []string{m.Server.NamesrvAddr, m.Server.BrokerAddr, m.Server.HAAddr, m.Admin.Addr, s.Server.NamesrvAddr, s.Server.BrokerAddr, s.Server.HAAddr, s.Admin.Addr} {
			if a == "" {
				continue
			}
			if other, dup := seen[a]; dup {
				t.Fatalf("%s and %s both use %s", pair[0], other, a)
			}
			seen[a] = pair[0]
		}
		if m.Store.Dir == s.Store.Dir {
			t.Fatalf("%v share a data dir", pair)
		}
		if s.Replication.MasterAddr != m.Server.HAAddr {
			t.Fatalf("%s points at %s, master HA is %s", pair[1], s.Replication.MasterAddr, m.Server.HAAddr)
		}
	}
}

// TestShippedClusterProfiles loads and checks every profile in
// configs/profiles/cluster (what `make cluster` starts): each passes
// `keel profile check`, the seven run side by side on one machine
// (distinct listeners and data dirs), every broker registers with all
// three name servers and follows all three controllers, the controllers'
// peers agree with their raft addresses, and each of the two groups has
// two sync-replication brokers in cluster mode.
func TestShippedClusterProfiles(t *testing.T) {
	dir := filepath.Join(profilesDir, "cluster")
	files, err := filepath.Glob(filepath.Join(dir, "*.toml"))
	if err != nil || len(files) != 7 {
		t.Fatalf("shipped cluster profiles: want 7 files in %s, got %v (%v)", dir, files, err)
	}
	var ctls, brokers []*profile.Profile
	for _, f := range files {
		p, err := profile.Load(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			checked, err := profile.Load(f, []string{"store.dir=" + t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			rows, err := host.Check(context.Background(), checked, builtins.Catalog())
			if err != nil {
				t.Fatal(err)
			}
			if checked.HasRole(profile.RoleBroker) && (len(rows) == 0 || rows[0].Answer == "") {
				t.Fatalf("broker profile without a durability table: %+v", rows)
			}
		})
		switch {
		case p.HasRole(profile.RoleController) && p.HasRole(profile.RoleNamesrv) && !p.HasRole(profile.RoleBroker):
			ctls = append(ctls, p)
		case p.ClusterMode() && len(p.Server.Roles) == 1:
			brokers = append(brokers, p)
		default:
			t.Fatalf("%s: roles %v: neither a name server with a controller nor a cluster-mode broker", f, p.Server.Roles)
		}
	}
	if len(ctls) != 3 || len(brokers) != 4 {
		t.Fatalf("want 3 name server + controller profiles and 4 brokers, got %d and %d", len(ctls), len(brokers))
	}
	seen, dirs := map[string]string{}, map[string]bool{}
	use := func(who, addr string) {
		if other, dup := seen[addr]; dup {
			t.Errorf("%s and %s both listen on %s", who, other, addr)
		}
		seen[addr] = who
	}
	var nsAddrs, ctlAddrs, peers []string
	for _, c := range ctls {
		who := c.Controller.NodeID
		use(who, c.Server.NamesrvAddr)
		use(who, c.Controller.Addr)
		use(who, c.Controller.RaftAddr)
		use(who, c.Admin.Addr)
		nsAddrs = append(nsAddrs, c.Server.NamesrvAddr)
		ctlAddrs = append(ctlAddrs, c.Controller.Addr)
		peers = append(peers, c.Controller.NodeID+"="+c.Controller.RaftAddr)
		if dirs[c.Store.Dir] {
			t.Errorf("%s shares data dir %s", who, c.Store.Dir)
		}
		dirs[c.Store.Dir] = true
	}
	for _, c := range ctls {
		if !sameSet(c.Controller.Peers, peers) {
			t.Errorf("controller %s: peers %v, want %v", c.Controller.NodeID, c.Controller.Peers, peers)
		}
	}
	groups := map[string]int{}
	for _, b := range brokers {
		who := b.Server.BrokerName + " " + b.Store.Dir
		use(who, b.Server.BrokerAddr)
		use(who, b.Server.HAAddr)
		use(who, b.Admin.Addr)
		if dirs[b.Store.Dir] {
			t.Errorf("%s shares its data dir", who)
		}
		dirs[b.Store.Dir] = true
		groups[b.Server.BrokerName]++
		if !sameSet(b.Server.NamesrvAddrs, nsAddrs) {
			t.Errorf("%s: namesrv_addrs %v, want the name servers %v", who, b.Server.NamesrvAddrs, nsAddrs)
		}
		if !sameSet(b.Controller.Addrs, ctlAddrs) {
			t.Errorf("%s: controller.addrs %v, want the controllers %v", who, b.Controller.Addrs, ctlAddrs)
		}
		if b.Replication.Plugin != "sync" {
			t.Errorf("%s: replication.plugin %q, want sync", who, b.Replication.Plugin)
		}
	}
	if len(groups) != 2 || groups["broker-a"] != 2 || groups["broker-b"] != 2 {
		t.Errorf("broker groups %v, want broker-a and broker-b with two brokers each", groups)
	}
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		if m[s]--; m[s] < 0 {
			return false
		}
	}
	return true
}

func startNode(t *testing.T, prof string, sets ...string) *host.Node {
	t.Helper()
	p, err := profile.Load(filepath.Join(profilesDir, prof), append(append([]string{}, portZero...), sets...))
	if err != nil {
		t.Fatal(err)
	}
	n, err := host.Start(context.Background(), p, host.Options{Catalog: builtins.Catalog()})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// send sends one message with the RocketMQ SEND_MESSAGE request and
// returns the response.
func send(t *testing.T, addr, topic, body string, props map[string]string) *remoting.Command {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := &remoting.Command{Code: remoting.CodeSendMessage, Language: "GO", Version: 317, Opaque: 7, ExtFields: remoting.FieldsOf(map[string]string{
		"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": fmt.Sprint(time.Now().UnixMilli()), "flag": "0",
		"properties": string(record.EncodeProperties(props)), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}), Body: []byte(body)}
	if _, err := req.WriteTo(c); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := remoting.ReadCommand(bufio.NewReader(c), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServeLifecycle starts a node on the sync-flush profile, sends over
// the remoting protocol, checks /status, /metrics and the key query, stops
// it and finds the message again after a restart.
func TestServeLifecycle(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, "sync-flush.toml", "store.dir="+dir, "store.segment_size=8MiB", "store.read_cache=1MiB")
	resp := send(t, n.Addr("broker"), "Orders", "hello", map[string]string{"KEYS": "order-42", "UNIQ_KEY": "U1", "TAGS": "new"})
	if resp.Code != 0 {
		t.Fatalf("send: code %d %s", resp.Code, resp.Remark)
	}
	msgID := resp.Ext("msgId")
	admin := "http://" + n.Addr("admin")
	var st host.StatusReport
	getJSON(t, admin+"/status", &st)
	if st.Role != "master" || st.Offsets["flushed"] < st.Offsets["committed"] || st.Offsets["committed"] == 0 {
		t.Fatalf("status after a sync-flush send: %+v", st)
	}
	if len(st.Plugins) != 2 || st.Plugins[0].State != "running" {
		t.Fatalf("plugins: %+v", st.Plugins)
	}
	m := getText(t, admin+"/metrics")
	for _, want := range []string{"keel_append_messages_total 1", `keel_acks_total{status="SEND_OK"} 1`, "keel_flush_total", "keel_plugin_state{kind=\"flush\",name=\"sync\",state=\"running\"} 1"} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, m)
		}
	}
	// Query by key through the hash index, once dispatched.
	deadline := time.Now().Add(5 * time.Second)
	var found []map[string]any
	for time.Now().Before(deadline) {
		found = nil
		getJSON(t, admin+"/query?topic=Orders&key=order-42", &found)
		if len(found) == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(found) != 1 || found[0]["body"] != "hello" {
		t.Fatalf("query by key: %v", found)
	}
	var byID map[string]any
	getJSON(t, admin+"/message?id="+msgID, &byID)
	if byID["body"] != "hello" {
		t.Fatalf("message by id %s: %v", msgID, byID)
	}
	// Repeated lookups by id are served by the read cache (its Set is
	// asynchronous, so allow a few rounds).
	hit := false
	for i := 0; i < 200 && !hit; i++ {
		getJSON(t, admin+"/message?id="+msgID, &byID)
		hit = !strings.Contains(getText(t, admin+"/metrics"), "keel_read_cache_hits_total 0\n")
		time.Sleep(5 * time.Millisecond)
	}
	if !hit {
		t.Fatal("read cache never hit for a repeated lookup by id")
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, "sync-flush.toml", "store.dir="+dir, "store.segment_size=8MiB")
	defer n.Stop(context.Background())
	if rec := n.Store().Recovery(); rec.Crashed {
		t.Fatalf("clean stop recovered as a crash: %+v", rec)
	}
	g, err := n.Store().GetMessages("Orders", 0, 0, 10, 1<<20, nil)
	if err != nil || len(g.Sizes) != 1 {
		t.Fatalf("after restart: %v %+v", err, g.Status)
	}
}

// TestExternalPluginCrash runs the hash index as an external process,
// kills it with SIGKILL, and checks that the host reports it degraded,
// restarts it, and that the index answers afterwards for messages sent
// while it was down.
func TestExternalPluginCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin binary")
	}
	bins := pluginBins(t)
	fastPluginPings(t)
	n := startNode(t, "default.toml", "store.dir="+t.TempDir(), "store.segment_size=8MiB",
		"index.plugin=", "index.path="+filepath.Join(bins, "keel-index-hash"))
	defer n.Stop(context.Background())
	admin := "http://" + n.Addr("admin")
	if r := send(t, n.Addr("broker"), "T", "before", map[string]string{"KEYS": "k1"}); r.Code != 0 {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	var st host.StatusReport
	getJSON(t, admin+"/status", &st)
	var pid int
	for _, p := range st.Plugins {
		if p.Kind == "index" {
			pid = p.Pid
		}
	}
	if pid == 0 {
		t.Fatalf("no external index pid in %+v", st.Plugins)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var detected, restarted time.Duration
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && restarted == 0; time.Sleep(5 * time.Millisecond) {
		getJSON(t, admin+"/status", &st)
		for _, p := range st.Plugins {
			if p.Kind != "index" {
				continue
			}
			if p.State == "degraded" && detected == 0 {
				detected = time.Since(killed)
			}
			if p.Restarts == 1 && p.State == "running" && p.Pid != pid {
				restarted = time.Since(killed)
				if detected == 0 {
					detected = p.LastCrash.Sub(killed)
				}
			}
		}
	}
	if restarted == 0 {
		t.Fatalf("plugin not restarted: %+v", st.Plugins)
	}
	t.Logf("external plugin SIGKILL: detected after %v, restarted after %v", detected, restarted)
	if r := send(t, n.Addr("broker"), "T", "after", map[string]string{"KEYS": "k2"}); r.Code != 0 {
		t.Fatalf("send after restart: %d %s", r.Code, r.Remark)
	}
	for _, key := range []string{"k1", "k2"} {
		var found []map[string]any
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			found = nil
			getJSON(t, admin+"/query?topic=T&key="+key, &found)
			if len(found) == 1 {
				break
			}
		}
		if len(found) != 1 {
			t.Fatalf("key %s not found after the plugin restart: %v", key, found)
		}
	}
}

// TestExternalFlushPluginCrashNeverHangsProducers kills the process of an
// external sync flush strategy: sends must fail fast with a clear status
// (SERVICE_NOT_AVAILABLE while it is down, or FLUSH_DISK_TIMEOUT for a send
// caught waiting), never hang, lose nothing already acknowledged, and
// succeed again once the host has restarted it.
func TestExternalFlushPluginCrashNeverHangsProducers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin binary")
	}
	bins := pluginBins(t)
	fastPluginPings(t)
	// A private copy of the binary, so the test can make restarts fail for
	// a while (the host restarts a killed plugin within ~0.1 s otherwise).
	bin := filepath.Join(t.TempDir(), "keel-flush")
	good, err := os.ReadFile(filepath.Join(bins, "keel-flush"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, good, 0o755); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "sync-flush.toml", "store.dir="+t.TempDir(), "store.segment_size=8MiB",
		"flush.plugin=", "flush.path="+bin, "flush.config.timeout=1s")
	defer n.Stop(context.Background())
	admin := "http://" + n.Addr("admin")
	if r := send(t, n.Addr("broker"), "T", "acked", nil); r.Code != 0 {
		t.Fatalf("send before the crash: %d %s", r.Code, r.Remark)
	}
	var st host.StatusReport
	getJSON(t, admin+"/status", &st)
	pid := 0
	for _, p := range st.Plugins {
		if p.Kind == "flush" {
			pid = p.Pid
		}
	}
	if pid == 0 {
		t.Fatalf("no external flush pid: %+v", st.Plugins)
	}
	// The binary is broken while the process dies: restarts fail until it
	// is put back.
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		os.Remove(bin)
		os.WriteFile(bin, good, 0o755)
	}()
	// Sends while it is down or restarting: a clear status within the
	// flush timeout plus slack, never a hang.
	sawFailure, sawOK := false, false
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !sawOK; {
		start := time.Now()
		r := send(t, n.Addr("broker"), "T", "during", nil)
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("a send took %v with the flush plugin down", took)
		}
		switch r.Code {
		case 0:
			sawOK = sawFailure // OK again after the restart
			if !sawFailure {
				time.Sleep(5 * time.Millisecond) // not yet seen down
			}
		case 10, 14: // FLUSH_DISK_TIMEOUT, SERVICE_NOT_AVAILABLE
			sawFailure = true
		default:
			t.Fatalf("unexpected status %d %s", r.Code, r.Remark)
		}
	}
	if !sawFailure || !sawOK {
		t.Fatalf("saw failure %v, saw recovery %v", sawFailure, sawOK)
	}
	g, err := n.Store().GetMessages("T", 0, 0, 1, 1<<20, nil)
	if err != nil || len(g.Sizes) != 1 {
		t.Fatalf("acknowledged message: %v %v", err, g.Status)
	}
}

// fastPluginPings makes the host ping external plugins every 100 ms for
// the rest of the test, so that a killed plugin is noticed quickly.
func fastPluginPings(t *testing.T) {
	old := host.PingEvery
	host.PingEvery = 100 * time.Millisecond
	t.Cleanup(func() { host.PingEvery = old })
}
