package pluginlane

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The floor under the lane: one byte bounced over a unix socket to a
// goroutine of the same process, and to another process. The difference
// is what every crossing of the process boundary costs on this machine
// whatever protocol runs over it (a wake-up of another process: on a
// virtual machine, often of an idle vCPU).

const echoEnv = "KEEL_LANE_ECHO_SOCKET"

func TestMain(m *testing.M) {
	if path := os.Getenv(echoEnv); path != "" {
		os.Exit(echoServe(path))
	}
	os.Exit(m.Run())
}

// echoServe accepts one connection on path and echoes it until EOF.
func echoServe(path string) int {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return 2
	}
	c, err := ln.Accept()
	if err != nil {
		return 2
	}
	ln.Close()
	_, _ = io.Copy(c, c)
	return 0
}

func BenchmarkPingPong(b *testing.B) {
	for _, mode := range []string{"same-process", "cross-process"} {
		b.Run(mode, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "echo")
			if mode == "same-process" {
				go echoServe(path)
			} else {
				cmd := exec.Command(os.Args[0], "-test.run=NONE")
				cmd.Env = append(os.Environ(), echoEnv+"="+path)
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			}
			var c net.Conn
			var err error
			for deadline := time.Now().Add(10 * time.Second); ; {
				if c, err = net.Dial("unix", path); err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := []byte{1}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
