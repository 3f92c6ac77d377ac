package peers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RedisBinary is the redis-server executable looked up on PATH.
const RedisBinary = "redis-server"

// RedisAvailable reports whether redis-server is on PATH.
func RedisAvailable() bool {
	_, err := exec.LookPath(RedisBinary)
	return err == nil
}

type redisProc struct {
	cmd  *exec.Cmd
	port int
	log  strings.Builder
}

func startRedis(ctx context.Context, dir, fsync string, replicaOf int) (*redisProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "",
		"--appendonly", "yes", "--appendfsync", fsync, "--daemonize", "no", "--protected-mode", "yes", "--logfile", "",
		"--repl-diskless-sync-delay", "0"}
	if replicaOf > 0 {
		args = append(args, "--replicaof", "127.0.0.1", strconv.Itoa(replicaOf))
	}
	p := &redisProc{port: port}
	p.cmd = exec.Command(RedisBinary, args...)
	p.cmd.Stdout = &p.log
	p.cmd.Stderr = &p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := dialRedis(port)
		if err == nil {
			_, err = c.do("PING")
			c.close()
			if err == nil {
				return p, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("redis-server on port %d not answering: %v: %s", port, err, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *redisProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// redisConn is a minimal RESP client: enough for SET, WAIT, PING, INFO.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dialRedis(port int) (*redisConn, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &redisConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

func (c *redisConn) close() { c.c.Close() }

func (c *redisConn) write(args ...[]byte) {
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n", len(a))
		c.w.Write(a)
		c.w.WriteString("\r\n")
	}
}

// read reads one reply: simple strings, integers and bulk strings are
// returned as text; errors as a Go error.
func (c *redisConn) read() (string, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redis: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("redis: bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(c.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redis: unexpected reply %q", line)
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (c *redisConn) do(args ...string) (string, error) {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	c.c.SetDeadline(time.Now().Add(10 * time.Second))
	c.write(bs...)
	if err := c.w.Flush(); err != nil {
		return "", err
	}
	return c.read()
}

func runRedis(ctx context.Context, s Spec) (*Result, error) {
	var fsync string
	var wait bool
	switch s.Config {
	case "always", "everysec":
		fsync = s.Config
	case "always-wait", "everysec-wait":
		fsync, wait = strings.TrimSuffix(s.Config, "-wait"), true
	default:
		return nil, fmt.Errorf("unknown Redis configuration %q", s.Config)
	}
	if !RedisAvailable() {
		return nil, fmt.Errorf("redis-server is not on PATH (install it, e.g. apt-get install redis-server): %w", ErrSkipped)
	}
	defer os.RemoveAll(s.Dir)
	master, err := startRedis(ctx, filepath.Join(s.Dir, "master"), fsync, 0)
	if err != nil {
		return nil, err
	}
	defer master.stop()
	if wait {
		replica, err := startRedis(ctx, filepath.Join(s.Dir, "replica"), fsync, master.port)
		if err != nil {
			return nil, err
		}
		defer replica.stop()
		c, err := dialRedis(master.port)
		if err != nil {
			return nil, err
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, err := c.do("WAIT", "1", "500")
			if err == nil && n == "1" {
				break
			}
			if time.Now().After(deadline) {
				c.close()
				return nil, fmt.Errorf("redis replica did not connect (WAIT says %q, %v)", n, err)
			}
		}
		c.close()
	}
	conns := make([]*redisConn, s.Producers)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}()
	for i := range conns {
		if conns[i], err = dialRedis(master.port); err != nil {
			return nil, err
		}
	}
	body := payload(s.BodyBytes)
	var mu sync.Mutex
	var waitShort int64
	res, err := load(ctx, s.Producers, s.Warmup, s.Duration, func(p int, seq uint64) error {
		c := conns[p]
		c.c.SetDeadline(time.Now().Add(10 * time.Second))
		key := []byte("k" + strconv.Itoa(p) + ":" + strconv.FormatUint(seq%100000, 10))
		c.write([]byte("SET"), key, body)
		if wait {
			c.write([]byte("WAIT"), []byte("1"), []byte("1000"))
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
		if _, err := c.read(); err != nil {
			return err
		}
		if wait {
			n, err := c.read()
			if err != nil {
				return err
			}
			if n != "1" {
				mu.Lock()
				waitShort++
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Note = fmt.Sprintf("redis-server appendfsync %s, SET of %d B", fsync, s.BodyBytes)
	if wait {
		res.Note += fmt.Sprintf(" + WAIT 1 1000 (replica on the same host; %d WAITs timed out)", waitShort)
	}
	return res, nil
}
