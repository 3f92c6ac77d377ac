package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// compiledIn is the example main that passes the echo replicator to
// cli.Main (a build with a plugin of one's own compiled in).
const compiledIn = "../../sdk/examples/compiled-in"

// echoProfile is a profile whose replication plugin is the compiled-in
// echo, every listener on the given loopback addresses.
func echoProfile(role, dataDir, namesrv, broker, ha, admin, master string) string {
	p := fmt.Sprintf(`schema = 1

[store]
dir = %q
segment_size = "8MiB"
disk_max_used_ratio = 0.97
disk_clean_forcibly_ratio = 0.98
disk_warning_ratio = 0.99

[flush]
plugin = "async"

[index]
plugin = "none"

[replication]
plugin = "echo"
role = %q
secret = "compiled-in-test"

[replication.config]
timeout = "10s"

[server]
namesrv_addr = %q
broker_addr = %q
ha_addr = %q

[admin]
addr = %q
`, dataDir, role, namesrv, broker, ha, admin)
	if master != "" {
		p = strings.Replace(p, "secret =", fmt.Sprintf("master_addr = %q\nsecret =", master), 1)
		p = strings.Replace(p, "[admin]", "broker_id = 1\n\n[admin]", 1)
	}
	return p
}

// TestCompiledInBuild: a main of a few lines that compiles the example
// echo replicator in (sdk/examples/compiled-in) has keel's command line
// with echo selectable by name: `profile check` describes it, `serve`
// runs a master and a slave on it and the master acknowledges a message
// once the slave holds it (acks wait for one replica), and `bench` runs
// the suite in the same process (no keelbench anywhere) with echo in its
// catalog.
func TestCompiledInBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a keel binary")
	}
	work := t.TempDir()
	exe := filepath.Join(work, "keel-echo")
	if out, err := exec.Command("go", "build", "-o", exe, compiledIn).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", compiledIn, err, out)
	}
	masterHA, masterBroker, slaveAdmin := freeAddr(t), freeAddr(t), freeAddr(t)
	profiles := map[string]string{
		"master.toml": echoProfile("master", filepath.Join(work, "master"), freeAddr(t), masterBroker, masterHA, freeAddr(t), ""),
		"slave.toml":  echoProfile("slave", filepath.Join(work, "slave"), freeAddr(t), freeAddr(t), freeAddr(t), slaveAdmin, masterHA),
	}
	for name, text := range profiles {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("profile check", func(t *testing.T) {
		out, err := exec.Command(exe, "profile", "check", filepath.Join(work, "master.toml")).CombinedOutput()
		if err != nil {
			t.Fatalf("profile check: %v\n%s", err, out)
		}
		for _, want := range []string{
			"# durability (flush: async; replication: echo; index: none)",
			"after 1 replica(s) acknowledged it (FLUSH_SLAVE_TIMEOUT after 10s",
		} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("profile check lacks %q:\n%s", want, out)
			}
		}
		if _, err := os.Stat(filepath.Join(work, "master")); !os.IsNotExist(err) {
			t.Errorf("profile check created the store dir (stat: %v)", err)
		}
	})

	t.Run("serve", func(t *testing.T) {
		master := startServe(t, exe, work, "serve", "--profile", "master.toml")
		slave := startServe(t, exe, work, "serve", "--profile", "slave.toml")
		for _, p := range []*serveProc{master, slave} {
			if out := p.output(); !strings.Contains(out, `msg="plugin started" kind=replication name=echo external=false`) {
				t.Errorf("no in-process echo plugin started:\n%s", out)
			}
		}
		// The slave connects in the background: until it does, the
		// master answers SLAVE_NOT_AVAILABLE at once.
		deadline := time.Now().Add(30 * time.Second)
		var id string
		for id == "" {
			resp := send(t, masterBroker, "Orders", "compiled in", nil)
			switch {
			case resp.Code == 0:
				id = resp.Ext("msgId")
			case time.Now().After(deadline):
				t.Fatalf("send to the echo master: %d %s\nmaster:\n%s\nslave:\n%s", resp.Code, resp.Remark, master.output(), slave.output())
			default:
				time.Sleep(100 * time.Millisecond)
			}
		}
		// The slave holds it (and dispatches it soon after the ack).
		for {
			out, err := runOut(t, "query", "--admin", slaveAdmin, "--id", id)
			if err == nil && strings.Contains(out, `"compiled in"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the slave does not have message %s: %v %s\nslave:\n%s", id, err, out, slave.output())
			}
			time.Sleep(100 * time.Millisecond)
		}
		slave.stop(t)
		master.stop(t)
	})

	t.Run("bench in process", func(t *testing.T) {
		bench := func(args ...string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, append([]string{"bench"}, args...)...)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "PATH="+t.TempDir()) // no keelbench to execute
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := bench("--help"); err != nil || !strings.Contains(out, "-config") || !strings.Contains(out, "-skip") {
			t.Errorf("bench --help: %v\n%s", err, out)
		}
		// The suite validates the matrix against the CLI's catalog: echo
		// is one of this build's builtin replication names.
		matrix := filepath.Join(t.TempDir(), "m.toml")
		const m = "schema = 1\nname = \"m\"\n[[matrix]]\nname = \"r\"\nworkloads = [\"produce\"]\nflush = [\"async\"]\nreplication = [\"nosuch\"]\n"
		if err := os.WriteFile(matrix, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := bench("--config", matrix, "--out", t.TempDir())
		if err == nil || !strings.Contains(out, `"nosuch" is not one of`) || !strings.Contains(out, `"echo"`) {
			t.Errorf("bench of a matrix naming an unknown replication: %v\n%s", err, out)
		}
	})
}
