package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// keelLog collects a keel process's stderr across restarts, each line
// prefixed with the run number, so a failing test can show it.
type keelLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *keelLog) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

// grep returns the lines containing every one of subs.
func (l *keelLog) grep(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, s := range l.lines {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

func (l *keelLog) tail(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) > n {
		return append([]string(nil), l.lines[len(l.lines)-n:]...)
	}
	return append([]string(nil), l.lines...)
}

// keelConfig says how to start keel. Empty addresses mean 127.0.0.1:0.
type keelConfig struct {
	profile string // file name under configs/profiles, e.g. "default.toml"
	data    string // data directory
	namesrv string
	broker  string
	admin   string
	extra   []string // more --set key=value
}

// keelProc is one running `keel serve` child process.
type keelProc struct {
	t   *testing.T
	cfg keelConfig
	run int
	log *keelLog

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // its exit status; valid after done

	// Addresses from the "listening" log lines.
	Namesrv, Broker, Admin string
}

var listeningRE = regexp.MustCompile(`msg=listening\b.*\brole=(\S+).*\baddr=(\S+)`)

// startKeel starts keel with cfg and waits until its name server, broker
// and admin listeners are up. It stops the process when the test ends and,
// if the test failed, logs the tail of keel's stderr.
func startKeel(t *testing.T, cfg keelConfig) *keelProc {
	t.Helper()
	if cfg.data == "" {
		cfg.data = t.TempDir()
	}
	k := &keelProc{t: t, cfg: cfg, run: 1, log: &keelLog{}}
	t.Cleanup(func() {
		k.stopQuietly()
		if t.Failed() {
			t.Logf("keel stderr (last 200 lines, all runs):\n%s", strings.Join(k.log.tail(200), "\n"))
		}
	})
	k.start()
	return k
}

func orZero(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

func (k *keelProc) start() {
	t := k.t
	t.Helper()
	args := []string{"serve",
		"--profile", filepath.Join(repoRoot, "configs", "profiles", k.cfg.profile),
		"--data", k.cfg.data,
		"--set", "server.namesrv_addr=" + orZero(k.cfg.namesrv),
		"--set", "server.broker_addr=" + orZero(k.cfg.broker),
		"--set", "server.ha_addr=127.0.0.1:0",
		"--set", "admin.addr=" + orZero(k.cfg.admin),
		// These tests are not about disk pressure: a fuller CI disk must
		// not make retention delete their segments or refuse their sends.
		"--set", "store.disk_max_used_ratio=0.97",
		"--set", "store.disk_clean_forcibly_ratio=0.98",
		"--set", "store.disk_warning_ratio=0.99",
	}
	for _, s := range k.cfg.extra {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(keelBin, args...)
	cmd.Dir = k.cfg.data
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("keel stderr pipe: %v", err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", keelBin, err)
	}
	k.cmd, k.done, k.err = cmd, make(chan struct{}), nil
	k.Namesrv, k.Broker, k.Admin = "", "", ""
	listening := make(chan [2]string, 8)
	run := k.run
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			k.log.add(fmt.Sprintf("[run %d] %s", run, line))
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				listening <- [2]string{m[1], m[2]}
			}
		}
		k.err = cmd.Wait()
		close(k.done)
	}()
	deadline := time.After(20 * time.Second)
	for k.Namesrv == "" || k.Broker == "" || k.Admin == "" {
		select {
		case l := <-listening:
			switch l[0] {
			case "namesrv":
				k.Namesrv = l[1]
			case "broker":
				k.Broker = l[1]
			case "admin":
				k.Admin = l[1]
			}
		case <-k.done:
			t.Fatalf("keel (run %d) exited before listening: %v\n%s", run, k.err, strings.Join(k.log.tail(50), "\n"))
		case <-deadline:
			t.Fatalf("keel (run %d) did not report namesrv, broker and admin listeners within 20s (got %q %q %q)\n%s",
				run, k.Namesrv, k.Broker, k.Admin, strings.Join(k.log.tail(50), "\n"))
		}
	}
	// Pin the ports for restarts, so that the clients' routes stay valid.
	k.cfg.namesrv, k.cfg.broker, k.cfg.admin = k.Namesrv, k.Broker, k.Admin
}

// stop sends SIGTERM and waits for a clean exit (status 0).
func (k *keelProc) stop() {
	k.t.Helper()
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		k.t.Fatalf("SIGTERM to keel: %v", err)
	}
	select {
	case <-k.done:
		if k.err != nil {
			k.t.Errorf("keel (run %d) did not exit cleanly after SIGTERM: %v", k.run, k.err)
		}
	case <-time.After(30 * time.Second):
		k.cmd.Process.Kill()
		<-k.done
		k.t.Fatalf("keel (run %d) did not exit within 30s of SIGTERM", k.run)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (k *keelProc) kill() {
	k.t.Helper()
	if err := k.cmd.Process.Kill(); err != nil {
		k.t.Fatalf("SIGKILL to keel: %v", err)
	}
	<-k.done
}

// restart starts keel again on the same data directory and the same ports.
func (k *keelProc) restart() {
	k.t.Helper()
	select {
	case <-k.done:
	default:
		k.t.Fatalf("restart: keel (run %d) is still running", k.run)
	}
	k.run++
	k.start()
}

func (k *keelProc) stopQuietly() {
	if k.cmd == nil {
		return
	}
	select {
	case <-k.done:
		return
	default:
	}
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		k.cmd.Process.Kill()
		<-k.done
	}
}

// metric reads one un-labelled sample from GET /metrics.
func (k *keelProc) metric(name string) (float64, error) {
	resp, err := http.Get("http://" + k.Admin + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("metric %s not in /metrics", name)
}

// status reads GET /status.
func (k *keelProc) status() (map[string]any, error) {
	resp, err := http.Get("http://" + k.Admin + "/status")
	if err != nil {
		return nil, fmt.Errorf("GET /status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /status: %s", resp.Status)
	}
	var st map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decoding /status: %w", err)
	}
	return st, nil
}

var errTimeout = errors.New("timed out")

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return errTimeout
		}
		time.Sleep(20 * time.Millisecond)
	}
}
