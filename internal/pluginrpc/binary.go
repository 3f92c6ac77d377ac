package pluginrpc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/keelmq/keel/sdk"
)

// CheckBinary checks, without starting it, that the plugin binary at path
// exists, is an executable regular file and, when pin is not empty (64 hex
// digits, either case), that its SHA-256 is pin. Dial calls it first; the
// host calls it to report problems against the profile's keys. Errors: a
// *MissingBinaryError, a *ChecksumError, a *PinError for a pin that is not
// 64 hex digits, or an error naming path (not executable, unreadable).
func CheckBinary(path, pin string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		abs, aerr := filepath.Abs(path)
		if aerr != nil {
			abs = path
		}
		return &MissingBinaryError{Path: path, Abs: abs}
	}
	if err != nil {
		return fmt.Errorf("plugin binary %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("plugin binary %s is not an executable file (mode %s)", path, fi.Mode())
	}
	if pin == "" {
		return nil
	}
	if b, err := hex.DecodeString(pin); err != nil || len(b) != sha256.Size {
		return &PinError{Path: path, Pin: pin}
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("plugin binary %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("read plugin binary %s: %w", path, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want := strings.ToLower(pin); got != want {
		return &ChecksumError{Path: path, Want: want, Got: got}
	}
	return nil
}

// MissingBinaryError: there is no file at the plugin binary's path.
type MissingBinaryError struct {
	Path string // as given
	Abs  string // Path made absolute against the working directory
}

func (e *MissingBinaryError) Error() string {
	return fmt.Sprintf("plugin binary %s not found (looked for %s): build it there (`make build` builds keel's own plugin binaries into bin/; for your own plugin, `go build -o %s` its main package, the one that calls sdk.Serve), or fix the path", e.Path, e.Abs, e.Abs)
}

// PinError: a sha256 pin that is not 64 hex digits.
type PinError struct{ Path, Pin string }

func (e *PinError) Error() string {
	return fmt.Sprintf("sha256 pin %q is not 64 hex digits (the SHA-256 of %s, as `sha256sum` prints it)", e.Pin, e.Path)
}

// ChecksumError: the binary's SHA-256 is not the pinned one: it was
// rebuilt or replaced since the pin was written.
type ChecksumError struct {
	Path string
	Want string // the pin, lower-case hex
	Got  string // the binary's SHA-256, lower-case hex
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("plugin binary %s has sha256 %s but the pin is %s (checksum mismatch): it was rebuilt or replaced; if that was intended, update the pin to %s, otherwise rebuild it from the source the pin was made for, or do not run it", e.Path, e.Got, e.Want, e.Got)
}

// HandshakeError: the binary started but did not complete keel's plugin
// handshake: it is not a keel plugin (it printed something else, or exited
// first), or it speaks another plugin protocol version.
type HandshakeError struct {
	Path string
	// PluginVersion is the protocol version the plugin speaks, 0 when it
	// gave none (not a keel plugin).
	PluginVersion int
	// Detail is what go-plugin saw, for a binary that is not a plugin.
	Detail string
}

func (e *HandshakeError) Error() string {
	if e.PluginVersion != 0 {
		return fmt.Sprintf("plugin %s speaks keel plugin protocol version %d, this keel speaks %d: rebuild the plugin against this keel's sdk (github.com/keelmq/keel/sdk, sdk.Version = %d)", e.Path, e.PluginVersion, sdk.Version, sdk.Version)
	}
	return fmt.Sprintf("%s is not a keel plugin: it did not answer keel's plugin handshake (protocol version %d) (%s); a keel plugin's main calls sdk.Serve, and the binary must be run by keel, not by hand (its output is in keel's log at debug level)", e.Path, sdk.Version, e.Detail)
}

// pluginVersionRE finds the plugin's version in go-plugin's "incompatible
// API version with plugin. Plugin version: N, Client versions: [...]".
var pluginVersionRE = regexp.MustCompile(`Plugin version: (\d+)`)

// handshakeError turns go-plugin's start errors that mean "not a keel
// plugin" or "another protocol version" into a *HandshakeError, and
// returns nil for others (a timeout, a checksum mismatch).
func handshakeError(path string, err error) *HandshakeError {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "incompatible API version"), strings.Contains(msg, "incompatible core API version"):
		if m := pluginVersionRE.FindStringSubmatch(msg); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n != 0 && n != sdk.Version {
				return &HandshakeError{Path: path, PluginVersion: n}
			}
		}
		first, _, _ := strings.Cut(msg, "\n")
		return &HandshakeError{Path: path, Detail: first}
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		first, _, _ := strings.Cut(msg, "\n")
		return &HandshakeError{Path: path, Detail: "it printed " + strconv.Quote(strings.TrimPrefix(first, "Unrecognized remote plugin message: "))}
	case strings.Contains(msg, "plugin exited before we could connect"):
		return &HandshakeError{Path: path, Detail: "it exited before the handshake; if it is a keel plugin, it failed at start"}
	}
	return nil
}
