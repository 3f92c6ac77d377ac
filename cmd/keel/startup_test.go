package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/keelmq/keel/internal/builtins"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/profile"
)

var (
	keelBinOnce sync.Once
	keelBinPath string
	keelBinErr  error
)

// keelBin builds the keel binary once (into the plugin binaries' temp
// dir, removed by TestMain).
func keelBin(t testing.TB) string {
	t.Helper()
	dir := pluginBins(t)
	keelBinOnce.Do(func() {
		keelBinPath = filepath.Join(dir, "keel")
		out, err := exec.Command("go", "build", "-o", keelBinPath, ".").CombinedOutput()
		if err != nil {
			keelBinErr = fmt.Errorf("build keel: %v\n%s", err, out)
		}
	})
	if keelBinErr != nil {
		t.Fatal(keelBinErr)
	}
	return keelBinPath
}

// runKeel runs the keel binary to its end in dir and returns its exit
// code and stderr.
func runKeel(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, keelBin(t), args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("keel %v did not exit within 90s:\n%s", args, stderr.String())
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), stderr.String()
		}
		t.Fatalf("run keel %v: %v", args, err)
	}
	return 0, stderr.String()
}

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

// checkFailedStart asserts a start that failed the way a startup failure
// must: exit 1, no panic or stack, and a last line that says it could not
// start and contains every one of wants.
func checkFailedStart(t *testing.T, rc int, out string, wants ...string) {
	t.Helper()
	if rc != 1 {
		t.Errorf("exit code %d, want 1", rc)
	}
	for _, bad := range []string{"panic", "goroutine ", "runtime error", ".go:"} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains %q:\n%s", bad, out)
		}
	}
	last := lastLine(out)
	if !strings.HasPrefix(last, "keel: cannot start: ") {
		t.Errorf("last line %q does not start with \"keel: cannot start: \"\n%s", last, out)
	}
	for _, w := range wants {
		if !strings.Contains(last, w) {
			t.Errorf("last line lacks %q:\n%s", w, last)
		}
	}
	if t.Failed() {
		t.Logf("full output:\n%s", out)
	} else {
		t.Logf("%s", last)
	}
}

// serveArgs is `keel serve` of a shipped profile on free loopback ports
// with a small segment size, data in dir.
func serveArgs(prof, dir string, sets ...string) []string {
	args := []string{"serve", "--profile", filepath.Join(mustAbs(profilesDir), prof), "--data", dir,
		"--set", "store.segment_size=8MiB"}
	for _, s := range append(append([]string{}, portZero...), sets...) {
		args = append(args, "--set", s)
	}
	return args
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// privatePlugin copies a built plugin binary into a directory of the
// test's own, so that processes running it can be found by path.
func privatePlugin(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pluginBins(t), name))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// processesOf lists the pids of live processes whose argv[0] is path.
func processesOf(t *testing.T, path string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to look for processes: %v", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if argv0, _, _ := bytes.Cut(b, []byte{0}); string(argv0) == path {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
				continue // a zombie is not running
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

func noProcessesOf(t *testing.T, path string) {
	t.Helper()
	// A killed child may take a moment to be gone.
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if pids = processesOf(t, path); len(pids) == 0 {
			return
		}
	}
	t.Errorf("plugin processes %v of %s outlived the failed start", pids, path)
}

func noAbortMarker(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, core.AbortFile)); err == nil {
		t.Errorf("abort marker left in %s by a start that never served", dir)
	} else if !os.IsNotExist(err) {
		t.Error(err)
	}
}

// storeOpened asserts the store in dir was created (core.Open ran).
func storeOpened(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, core.CheckpointFile)); err != nil {
		t.Errorf("the store in %s was never opened (%v): the test does not test a failure after core.Open", dir, err)
	}
}

// makeStore creates a store in dir with one message in it, stopped
// cleanly, and returns the path of its first segment.
func makeStore(t *testing.T, dir string) string {
	t.Helper()
	n := startNode(t, "default.toml", "store.dir="+dir, "store.segment_size=8MiB")
	if r := send(t, n.Addr("broker"), "T", strings.Repeat("x", 200), map[string]string{"KEYS": "k"}); r.Code != 0 {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, core.CommitlogDir, "0*"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	return segs[0]
}

// TestStartupFailures runs `keel serve` into each startup failure an
// operator meets: each must end with one line naming the cause and exit
// 1, never a panic, close what it opened (no abort marker from a start
// that never served, no external plugin process left) .
func TestStartupFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the keel and plugin binaries")
	}
	work := t.TempDir() // the binaries' working directory

	t.Run("address in use", func(t *testing.T) {
		held, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		addr := held.Addr().String()
		dir := filepath.Join(t.TempDir(), "store")
		rc, out := runKeel(t, work, serveArgs("default.toml", dir, "server.broker_addr="+addr)...)
		checkFailedStart(t, rc, out, "broker listener", "server.broker_addr "+addr+" is already in use",
			"another keel or RocketMQ is listening there", "change server.broker_addr or stop it")
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the store dir was touched before the listeners were bound: %v", err)
		}
	})

	t.Run("HA address in use", func(t *testing.T) {
		held, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		addr := held.Addr().String()
		rc, out := runKeel(t, work, serveArgs("async-master.toml", filepath.Join(t.TempDir(), "store"), "server.ha_addr="+addr)...)
		checkFailedStart(t, rc, out, "server.ha_addr "+addr+" is already in use")
	})

	t.Run("data dir is a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		rc, out := runKeel(t, work, serveArgs("default.toml", f)...)
		checkFailedStart(t, rc, out, "data dir "+f+" (store.dir) is a file, not a directory")
		rc, out = runKeel(t, work, serveArgs("default.toml", filepath.Join(f, "sub"))...)
		checkFailedStart(t, rc, out, "data dir "+filepath.Join(f, "sub")+" (store.dir) cannot be created", "not a directory")
	})

	t.Run("data dir unreadable or unwritable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads and writes any directory")
		}
		for _, c := range []struct {
			mode os.FileMode
			want string
		}{{0o300, "is not readable"}, {0o500, "is not writable"}} {
			dir := filepath.Join(t.TempDir(), "store")
			if err := os.Mkdir(dir, c.mode); err != nil {
				t.Fatal(err)
			}
			rc, out := runKeel(t, work, serveArgs("default.toml", dir)...)
			os.Chmod(dir, 0o755)
			checkFailedStart(t, rc, out, "data dir "+dir+" (store.dir) "+c.want)
		}
	})

	t.Run("data dir in use", func(t *testing.T) {
		dir := t.TempDir()
		n := startNode(t, "default.toml", "store.dir="+dir, "store.segment_size=8MiB")
		defer n.Stop(context.Background())
		before := treeState(t, dir)
		rc, out := runKeel(t, work, serveArgs("default.toml", dir)...)
		checkFailedStart(t, rc, out, "data dir "+dir+" (store.dir) is in use by another keel process (pid "+strconv.Itoa(os.Getpid())+")")
		// Only the lock file's open by the failed start may show; the
		// live store's files are untouched and its abort marker is there.
		// The live node's own periodic writers (metadata under config/,
		// the timer's checkpoints under timer/) may write meanwhile, so
		// those are left out of the comparison.
		live := func(m map[string]fileState) map[string]fileState {
			for p := range m {
				if rel, _ := filepath.Rel(dir, p); strings.HasPrefix(rel, "config") || strings.HasPrefix(rel, "timer") {
					delete(m, p)
				}
			}
			return m
		}
		before = live(before)
		if after := live(treeState(t, dir)); !sameTree(before, after) {
			t.Errorf("a start refused by the lock changed the live store:\nbefore %v\nafter  %v", before, after)
		}
		if _, err := os.Stat(filepath.Join(dir, core.AbortFile)); err != nil {
			t.Errorf("the live node's abort marker is gone: %v", err)
		}
	})

	t.Run("plugin binary missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		missing := filepath.Join(t.TempDir(), "keel-index-hash")
		rc, out := runKeel(t, work, serveArgs("default.toml", dir, "index.plugin=", "index.path="+missing)...)
		checkFailedStart(t, rc, out, "index.path", missing, "not found")
		noAbortMarker(t, dir)
	})

	t.Run("plugin binary fails its sha256 pin", func(t *testing.T) {
		bin := privatePlugin(t, "keel-index-hash")
		b, _ := os.ReadFile(bin)
		actual := fmt.Sprintf("%x", sha256.Sum256(b))
		pinned := strings.Repeat("ab", 32)
		dir := filepath.Join(t.TempDir(), "store")
		rc, out := runKeel(t, work, serveArgs("default.toml", dir, "index.plugin=", "index.path="+bin, "index.sha256="+pinned)...)
		checkFailedStart(t, rc, out, "index.sha256", bin, "has sha256 "+actual, "the profile pins "+pinned,
			`set index.sha256 = "`+actual+`" in the profile`)
		noAbortMarker(t, dir)
		noProcessesOf(t, bin)
	})

	t.Run("unknown builtin plugin", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		rc, out := runKeel(t, work, serveArgs("default.toml", dir, "index.plugin=nosuch")...)
		checkFailedStart(t, rc, out, `index.plugin: unknown builtin "nosuch"`, "builtins: hash")
		noAbortMarker(t, dir)
	})

	t.Run("error in a plugin's config table", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		rc, out := runKeel(t, work, serveArgs("default.toml", dir, "flush.config.interval=-5s")...)
		checkFailedStart(t, rc, out, "configure flush plugin async", "flush.config.interval")
		noAbortMarker(t, dir)
		rc, out = runKeel(t, work, serveArgs("default.toml", dir, "index.config.no_such_key=1")...)
		checkFailedStart(t, rc, out, "configure index plugin hash", "index.config.no_such_key")
		noAbortMarker(t, dir)
	})

	t.Run("external plugin killed when a later plugin fails", func(t *testing.T) {
		bin := privatePlugin(t, "keel-index-hash")
		dir := filepath.Join(t.TempDir(), "store")
		rc, out := runKeel(t, work, serveArgs("default.toml", dir, "index.plugin=", "index.path="+bin, "replication.plugin=nosuch")...)
		checkFailedStart(t, rc, out, `replication.plugin: unknown builtin "nosuch"`)
		noAbortMarker(t, dir)
		noProcessesOf(t, bin)
	})

	t.Run("failure after the store was opened", func(t *testing.T) {
		// A damaged replication state file makes the replication plugin's
		// Start fail, after core.Open; the index runs as an external
		// process, which must not outlive the failure.
		bin := privatePlugin(t, "keel-index-hash")
		dir := filepath.Join(t.TempDir(), "store")
		state := filepath.Join(dir, "plugins", "replication", "replication-state.json")
		if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state, []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
		rc, out := runKeel(t, work, serveArgs("async-master.toml", dir, "index.plugin=", "index.path="+bin)...)
		checkFailedStart(t, rc, out, "start replication plugin async", "replication state "+state+" is damaged")
		storeOpened(t, dir)
		noAbortMarker(t, dir)
		noProcessesOf(t, bin)
		// The store closed cleanly: the next start is not a crash.
		n := startNode(t, "default.toml", "store.dir="+dir, "store.segment_size=8MiB")
		defer n.Stop(context.Background())
		if rec := n.Store().Recovery(); rec.Crashed {
			t.Errorf("the start after a failed one recovered as a crash: %+v", rec)
		}
	})

	t.Run("corrupt checkpoint", func(t *testing.T) {
		dir := t.TempDir()
		makeStore(t, dir)
		ck := filepath.Join(dir, core.CheckpointFile)
		if err := os.WriteFile(ck, bytes.Repeat([]byte{0xa5}, 256), 0o644); err != nil {
			t.Fatal(err)
		}
		rc, out := runKeel(t, work, serveArgs("default.toml", dir)...)
		checkFailedStart(t, rc, out, "open store "+dir, "checkpoint unreadable: "+ck, "no valid slot", "keel store repair")
		noAbortMarker(t, dir)
	})

	t.Run("corruption below the checkpoint", func(t *testing.T) {
		dir := t.TempDir()
		seg := makeStore(t, dir)
		// Damage the body of the first record, then leave the store as a
		// crash would (an abort marker), so recovery checks CRCs below the
		// checkpoint.
		f, err := os.OpenFile(seg, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("DAMAGED"), 150); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.WriteFile(filepath.Join(dir, core.AbortFile), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rc, out := runKeel(t, work, serveArgs("default.toml", dir)...)
		checkFailedStart(t, rc, out, "commitlog corrupt below the durable checkpoint", seg, "at offset 0", "keel store repair", "`keel store repair --dry-run "+dir+"` shows what it would cut")
		// The store was never opened: the crash's marker stays, so the
		// next start (after a repair) still recovers.
		if _, err := os.Stat(filepath.Join(dir, core.AbortFile)); err != nil {
			t.Errorf("the crash's abort marker was removed by a start that refused the store: %v", err)
		}
	})
}

// TestServeTwice is `make run` started twice: the second keel serve on
// the same profile, ports and data dir prints the address-in-use line and
// exits 1, and the first goes on serving and stops cleanly.
func TestServeTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the keel binary")
	}
	work := t.TempDir()
	dir := filepath.Join(work, "data")
	var sets []string
	for _, key := range []string{"server.namesrv_addr", "server.broker_addr", "admin.addr"} {
		sets = append(sets, key+"="+freeAddr(t))
	}
	args := serveArgs("default.toml", dir, sets...)
	first := startServe(t, keelBin(t), work, args...)
	nsAddr := strings.TrimPrefix(sets[0], "server.namesrv_addr=")
	rc, out := runKeel(t, work, args...)
	checkFailedStart(t, rc, out, "name server listener: server.namesrv_addr "+nsAddr+" is already in use",
		"another keel or RocketMQ is listening there")
	// The first is unharmed: it answers, and stops cleanly on SIGTERM.
	adminAddr := strings.TrimPrefix(sets[2], "admin.addr=")
	resp, err := http.Get("http://" + adminAddr + "/status")
	if err != nil {
		t.Fatalf("the first node stopped answering: %v", err)
	}
	resp.Body.Close()
	if _, err := os.Stat(filepath.Join(dir, core.AbortFile)); err != nil {
		t.Errorf("the running node's abort marker is gone: %v", err)
	}
	first.stop(t)
	noAbortMarker(t, dir)
}

// freeAddr is a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// fileState is what treeState records of one path.
type fileState struct {
	dir   bool
	size  int64
	mtime time.Time
	mode  os.FileMode
}

// treeState lists every path under root with its size, mtime and mode.
func treeState(t *testing.T, root string) map[string]fileState {
	t.Helper()
	m := map[string]fileState{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		m[p] = fileState{fi.IsDir(), fi.Size(), fi.ModTime(), fi.Mode()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameTree(a, b map[string]fileState) bool {
	if len(a) != len(b) {
		return false
	}
	for p, fa := range a {
		fb, ok := b[p]
		if !ok || fa.dir != fb.dir || fa.mode != fb.mode || (!fa.dir && (fa.size != fb.size || !fa.mtime.Equal(fb.mtime))) {
			return false
		}
	}
	return true
}

// TestProfileCheckReadOnly runs `keel profile check` where it used to
// write: in an empty working directory (the default profile's store.dir
// is relative), and against an existing store left as a crash leaves it
// (abort marker, index files), with the index builtin and as an external
// process. Nothing may be created or modified, and no scratch file or
// plugin process may be left behind.
func TestProfileCheckReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the keel and plugin binaries")
	}
	crashed := t.TempDir()
	makeStore(t, crashed)
	if err := os.WriteFile(filepath.Join(crashed, core.AbortFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(crashed, "plugins", "index")); err != nil {
		t.Fatalf("the store has no index files to protect: %v", err)
	}
	bin := privatePlugin(t, "keel-index-hash")
	for _, c := range []struct {
		name string
		dir  string // the working directory
		args []string
	}{
		{"empty working dir", t.TempDir(), []string{filepath.Join(mustAbs(profilesDir), "default.toml")}},
		{"crashed store, builtin index", t.TempDir(), []string{filepath.Join(mustAbs(profilesDir), "default.toml"), "--set", "store.dir=" + crashed}},
		{"crashed store, external index", t.TempDir(), []string{filepath.Join(mustAbs(profilesDir), "external-index.toml"),
			"--set", "store.dir=" + crashed, "--set", "index.path=" + bin}},
		{"slave profile", t.TempDir(), []string{filepath.Join(mustAbs(profilesDir), "sync-slave.toml"), "--set", "store.dir=" + crashed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir() // the check's TMPDIR: scratch dirs must be gone after it
			beforeWork, beforeStore := treeState(t, c.dir), treeState(t, crashed)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, keelBin(t), append([]string{"profile", "check"}, c.args...)...)
			cmd.Dir = c.dir
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("profile check: %v\n%s", err, out)
			}
			if !bytes.Contains(out, []byte(": valid")) || !bytes.Contains(out, []byte("# durability")) {
				t.Fatalf("profile check output:\n%s", out)
			}
			if after := treeState(t, c.dir); !sameTree(beforeWork, after) {
				t.Errorf("profile check changed its working directory:\nbefore %v\nafter  %v", beforeWork, after)
			}
			if after := treeState(t, crashed); !sameTree(beforeStore, after) {
				t.Errorf("profile check changed the store:\n%s", treeDiff(beforeStore, after))
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("profile check left %d entries in TMPDIR, first %s", len(left), left[0].Name())
			}
			noProcessesOf(t, bin)
		})
	}
	// Still a check of the profile against that store: an index made with
	// other hash_slots is refused, without touching it.
	before := treeState(t, crashed)
	rc, out := runKeel(t, t.TempDir(), "profile", "check", "--set", "store.dir="+crashed, "--set", "index.config.hash_slots=1000",
		filepath.Join(mustAbs(profilesDir), "default.toml"))
	if rc == 0 || !strings.Contains(out, "was made with hash_slots = 5000000, the configuration says 1000") {
		t.Errorf("profile check of another hash_slots: exit %d\n%s", rc, out)
	}
	if after := treeState(t, crashed); !sameTree(before, after) {
		t.Errorf("profile check changed the store:\n%s", treeDiff(before, after))
	}
}

// treeDiff describes how two treeState listings differ.
func treeDiff(a, b map[string]fileState) string {
	var s strings.Builder
	for p, fa := range a {
		fb, ok := b[p]
		switch {
		case !ok:
			fmt.Fprintf(&s, "removed %s\n", p)
		case fa != fb:
			fmt.Fprintf(&s, "changed %s: %+v -> %+v\n", p, fa, fb)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			fmt.Fprintf(&s, "created %s\n", p)
		}
	}
	return s.String()
}

// TestFailedStartReleasesEverything fails host.Start in this process at
// its last listener and after the store was opened, and checks that what
// it took is given back: the addresses it bound can be bound again, and
// the data dir (its lock, its store) opens again at once, cleanly.
func TestFailedStartReleasesEverything(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ns, broker := freeAddr(t), freeAddr(t)
	dir := t.TempDir()
	p, err := profile.Load(filepath.Join(profilesDir, "default.toml"), append(append([]string{}, portZero...),
		"store.dir="+dir, "server.namesrv_addr="+ns, "server.broker_addr="+broker, "admin.addr="+held.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	n, err := host.Start(context.Background(), p, host.Options{Logger: discard(), Catalog: builtins.Catalog()})
	if err == nil {
		n.Stop(context.Background())
		t.Fatal("started with the admin address taken")
	}
	if !strings.Contains(err.Error(), "admin.addr "+held.Addr().String()+" is already in use") || n != nil {
		t.Fatalf("Start = %v, %v", n, err)
	}
	for _, a := range []string{ns, broker} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("a failed start kept %s: %v", a, err)
		}
		l.Close()
	}

	// After core.Open: the replication plugin's Start fails.
	state := filepath.Join(dir, "plugins", "replication", "replication-state.json")
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = profile.Load(filepath.Join(profilesDir, "async-master.toml"), append(append([]string{}, portZero...), "store.dir="+dir, "store.segment_size=8MiB"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err = host.Start(context.Background(), p, host.Options{Logger: discard(), Catalog: builtins.Catalog()}); err == nil || n != nil {
		t.Fatalf("started with a damaged replication state: %v", err)
	}
	storeOpened(t, dir)
	noAbortMarker(t, dir)
	os.Remove(state)
	n = startNode(t, "async-master.toml", "store.dir="+dir, "store.segment_size=8MiB")
	defer n.Stop(context.Background())
	if rec := n.Store().Recovery(); rec.Crashed {
		t.Errorf("the start after a failed one recovered as a crash: %+v", rec)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestGroupSIGTERMStopsCleanly: SIGTERM sent to keel's whole process
// group (systemd's KillMode=control-group, `kill -TERM -- -PGID`) with an
// external plugin running stops keel cleanly: exit status 0 and no abort
// marker, so the next start needs no crash recovery. Before plugins ran in
// a group of their own, the plugin got the same SIGTERM, exited under the
// host's shutdown, and the last checkpoint failed.
func TestGroupSIGTERMStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the keel binary and a plugin")
	}
	work := t.TempDir()
	dir := filepath.Join(work, "data")
	args := serveArgs("default.toml", dir, "index.plugin=", "index.path="+filepath.Join(pluginBins(t), "keel-index-hash"))
	p := startServe(t, keelBin(t), work, args...)
	p.stopGroup(t)
	if _, err := os.Stat(filepath.Join(dir, core.AbortFile)); err == nil {
		t.Fatalf("the abort marker is left after a group SIGTERM:\n%s", p.output())
	}
	if strings.Contains(p.output(), "plugin exited") {
		t.Fatalf("the plugin exited under the host's shutdown:\n%s", p.output())
	}
}

// TestTimerSettingsChangeRefusedAtStart: a store whose timer index was
// built with store.timer_precision 1s does not start with 100ms: exit 1,
// the last line naming the setting, instead of serving and acknowledging
// timer messages it would never deliver. With the old setting it starts.
func TestTimerSettingsChangeRefusedAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the keel binary")
	}
	work := t.TempDir()
	dir := filepath.Join(work, "data")
	startServe(t, keelBin(t), work, serveArgs("default.toml", dir)...).stop(t)
	rc, out := runKeel(t, work, serveArgs("default.toml", dir, "store.timer_precision=100ms")...)
	checkFailedStart(t, rc, out, "timer", "timer_precision")
	startServe(t, keelBin(t), work, serveArgs("default.toml", dir)...).stop(t)
}
