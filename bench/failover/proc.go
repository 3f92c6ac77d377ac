package failover

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one keel node process (this executable re-run as a child).
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// waited is closed when Wait returned; err is its result.
	waited chan struct{}
	err    error

	mu     sync.Mutex
	stderr bytes.Buffer // the child's log (warnings and errors)
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stderr.Len() < 1<<20 {
		p.stderr.Write(b)
	}
	return len(b), nil
}

// log returns the child's last log lines.
func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.TrimSpace(p.stderr.String())
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// startProc starts a node as spec says in its own
// process group and waits (until ctx ends or the child exits) until it
// prints readyLine. On failure the child is killed and waited for.
func startProc(ctx context.Context, name string, spec childSpec) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("failover: find this executable: %w", err)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, waited: make(chan struct{})}
	// The same arguments: a main reaches MaybeChild through them (keel
	// bench → bench.Main).
	p.cmd = exec.Command(exe, os.Args[1:]...)
	p.cmd.Env = append(os.Environ(), ChildEnv+"="+string(js))
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stderr = p
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("failover: start %s: %w", name, err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok && sc.Text() == readyLine {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	go func() { p.err = p.cmd.Wait(); close(p.waited) }()
	select {
	case ok := <-ready:
		if ok {
			return p, nil
		}
		<-p.waited
		return nil, fmt.Errorf("failover: %s exited before it served (%v): %s", name, p.err, p.log())
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("failover: %s not serving: %w: %s", name, ctx.Err(), p.log())
	}
}

// kill sends SIGKILL to the process group and waits for the child.
func (p *proc) kill() {
	select {
	case <-p.waited:
		p.stdin.Close()
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.waited
	p.stdin.Close()
}

// pause stops the process group (SIGSTOP): a hung node whose sockets
// stay open. It returns once the child is seen stopped (/proc state T),
// or after a second.
func (p *proc) pause() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP)
	stat := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return
		}
		// pid (comm) state ...
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
	}
}

// stop asks the child to stop (SIGTERM, and SIGCONT should it be
// paused), and kills its group if it has
// not exited within 20 s.
func (p *proc) stop() {
	select {
	case <-p.waited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
	select {
	case <-p.waited:
	case <-time.After(20 * time.Second):
	}
	p.kill()
}

// freeAddrs picks n addresses at once (held together, so they differ).
func freeAddrs(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("failover: pick a port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	if len(out) != n {
		return nil, errors.New("failover: could not pick ports")
	}
	return out, nil
}
