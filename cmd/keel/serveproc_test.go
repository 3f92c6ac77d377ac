package main

import (
	"bufio"
	"bytes"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveProc is a `serve` process a test started (startServe).
type serveProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer  // its standard error so far
	done chan struct{} // closed when standard error is drained
}

// startServe starts `exe args...` (a serve command line) in dir, in a
// process group of its own (as a shell or systemd starts it), and returns
// once its admin listener is up (the "role=admin" log line). The process
// is killed when the test ends if it is still running.
func startServe(t *testing.T, exe, dir string, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{cmd: exec.Command(exe, args...), done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	ready := make(chan struct{})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		closed := false
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if !closed && strings.Contains(sc.Text(), "role=admin") {
				close(ready)
				closed = true
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-ready:
	case <-p.done:
		p.cmd.Wait()
		t.Fatalf("%s %v exited before it listened:\n%s", exe, args, p.output())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s %v did not start listening within 60s:\n%s", exe, args, p.output())
	}
	return p
}

// output is what the process wrote to standard error so far.
func (p *serveProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// stop sends SIGTERM and fails the test unless the process exits with
// status 0 within 60s.
func (p *serveProc) stop(t *testing.T) { p.stopWith(t, p.cmd.Process.Pid) }

// stopGroup is stop with the SIGTERM sent to the process's whole group,
// as systemd's KillMode=control-group and a terminal's job control do.
func (p *serveProc) stopGroup(t *testing.T) { p.stopWith(t, -p.cmd.Process.Pid) }

func (p *serveProc) stopWith(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-p.done; exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v:\n%s", err, p.output())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop within 60s of SIGTERM:\n%s", p.output())
	}
}
