package pluginrpc

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugin.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func dialFor(t *testing.T, path, pin string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialOptions{Path: path, SHA256: pin, Logger: slog.New(slog.DiscardHandler), SocketDir: t.TempDir(), StartTimeout: 10 * time.Second})
	if c != nil {
		c.Kill()
		t.Fatalf("Dial(%s) succeeded", path)
	}
	return err
}

func wantAll(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err, p)
		}
	}
}

// TestDialMissingBinary: the error names the path it resolved and how to
// build the binary.
func TestDialMissingBinary(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	err := dialFor(t, "bin/my-plugin", "")
	var me *MissingBinaryError
	if !errors.As(err, &me) || me.Abs != filepath.Join(dir, "bin/my-plugin") {
		t.Fatalf("error %v (%#v), want a *MissingBinaryError resolving to %s", err, me, filepath.Join(dir, "bin/my-plugin"))
	}
	wantAll(t, err, "bin/my-plugin not found", "looked for "+me.Abs, "go build -o "+me.Abs, "make build")
}

// TestDialChecksumMismatch: the error names both digests, the binary's
// path and the fix.
func TestDialChecksumMismatch(t *testing.T) {
	path := script(t, "exit 0")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	actual := fmt.Sprintf("%x", sha256.Sum256(b))
	pin := strings.Repeat("AB", 32)
	err = dialFor(t, path, pin)
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Got != actual || ce.Want != strings.ToLower(pin) {
		t.Fatalf("error %v, want a *ChecksumError with got %s", err, actual)
	}
	wantAll(t, err, path, "has sha256 "+actual, "the pin is "+strings.ToLower(pin), "checksum mismatch", "update the pin to "+actual, "rebuild")
	// The right pin, in either case, passes the check (the script then
	// fails the handshake).
	var he *HandshakeError
	if err := dialFor(t, path, strings.ToUpper(actual)); !errors.As(err, &he) {
		t.Errorf("with the right pin: %v, want a handshake error", err)
	}
	if err := dialFor(t, path, "abc"); !errors.As(err, new(*PinError)) {
		t.Errorf("a malformed pin: %v", err)
	}
}

// TestDialNotAKeelPlugin: a binary that prints something else, or exits
// at once, is reported as not a keel plugin, with what it did.
func TestDialNotAKeelPlugin(t *testing.T) {
	for name, body := range map[string]string{
		"prints": "echo hello from a shell script",
		"exits":  "exit 3",
	} {
		t.Run(name, func(t *testing.T) {
			path := script(t, body)
			err := dialFor(t, path, "")
			var he *HandshakeError
			if !errors.As(err, &he) || he.PluginVersion != 0 {
				t.Fatalf("error %v, want a *HandshakeError without a version", err)
			}
			wantAll(t, err, path+" is not a keel plugin", "protocol version 1", "sdk.Serve")
			if name == "prints" {
				wantAll(t, err, `"hello from a shell script"`)
			}
		})
	}
}

// TestDialWrongProtocolVersion: a go-plugin handshake line of another
// protocol version names both versions and the fix.
func TestDialWrongProtocolVersion(t *testing.T) {
	path := script(t, "echo '1|7|unix|/nonexistent.sock|grpc|'; sleep 2")
	err := dialFor(t, path, "")
	var he *HandshakeError
	if !errors.As(err, &he) || he.PluginVersion != 7 {
		t.Fatalf("error %v, want a *HandshakeError with version 7", err)
	}
	wantAll(t, err, "speaks keel plugin protocol version 7, this keel speaks 1", "rebuild the plugin against this keel's sdk")
}

// TestDialHungPluginEndsItsChildren: a binary that never answers the
// handshake and whose child holds its output open (a shell script
// running sleep) fails at the start timeout, and its whole process group
// is gone by then: neither the binary nor the child is left, and Dial does
// not wait for the child to close the pipe.
func TestDialHungPluginEndsItsChildren(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "child.pid")
	path := script(t, "sleep 60 & echo $! > "+marker+"; wait")
	start := time.Now()
	_, err := Dial(context.Background(), DialOptions{Path: path, Logger: slog.New(slog.DiscardHandler), SocketDir: t.TempDir(), StartTimeout: time.Second})
	if err == nil {
		t.Fatal("a plugin that never answers was dialed")
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("Dial took %v to give up on a 1 s start timeout (waiting for the child's pipe?)", took)
	}
	raw, rerr := os.ReadFile(marker)
	if rerr != nil {
		t.Fatalf("the script's child never started: %v", rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			break // gone (zombies are reaped by init)
		}
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the hung plugin's child (pid %d) outlived Dial", pid)
		}
	}
}
