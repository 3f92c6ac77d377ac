package pluginrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
	"github.com/keelmq/keel/sdk"
)

// DialOptions configures Dial.
type DialOptions struct {
	// Path is the plugin binary. Required.
	Path string
	// SHA256, if not empty, pins the binary: 64 hex digits of its SHA-256,
	// checked before it is started (go-plugin's SecureConfig).
	SHA256 string
	// Logger receives the plugin's logs (its slog/hclog JSON lines on
	// stderr at their own level, Host.Log lines, raw output at debug) and
	// go-plugin's own. nil means slog.Default().
	Logger *slog.Logger
	// Args are extra command-line arguments for the binary.
	Args []string
	// Env is added to the host's environment for the plugin process.
	Env []string
	// SocketDir, if set, is where the plugin creates its unix socket
	// (PLUGIN_UNIX_SOCKET_DIR). A plugin killed with SIGKILL leaves its
	// socket file behind, so a host should use a directory it owns and
	// cleans. Empty means the system temporary directory.
	SocketDir string
	// NoLane keeps the plugin's Host calls on the brokered gRPC
	// connection. By default each started plugin is also offered a lane
	// (package pluginlane: the same calls over a plain unix socket in
	// SocketDir, several times cheaper), which a plugin built with this
	// SDK takes.
	NoLane bool
	// StartTimeout bounds the handshake. 0 means the context's deadline,
	// or 30 s without one.
	StartTimeout time.Duration
}

// defaultStartTimeout bounds the handshake when neither the options nor
// the context do.
const defaultStartTimeout = 30 * time.Second

// Dial starts the plugin binary at o.Path (checking it against o.SHA256
// first when that is not empty), performs go-plugin's handshake (protocol
// version sdk.Version, gRPC only) and asks the binary which plugin kinds
// and optional interfaces it serves. The process runs until Kill.
//
// Errors say what to do: a missing binary is a *MissingBinaryError, a
// digest that differs from the pin a *ChecksumError (both digests), a
// binary that is not a keel plugin or speaks another protocol version a
// *HandshakeError; besides them, a start timeout or ctx ending. On error
// no process is left running.
func Dial(ctx context.Context, o DialOptions) (*Client, error) {
	if o.Path == "" {
		return nil, fmt.Errorf("dial plugin: no path")
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("plugin_path", o.Path)
	if err := CheckBinary(o.Path, o.SHA256); err != nil {
		return nil, fmt.Errorf("dial plugin %s: %w", o.Path, err)
	}
	var sec *plugin.SecureConfig
	if o.SHA256 != "" {
		// Checked again when the process starts (go-plugin's SecureConfig),
		// in case the file was replaced since.
		sum, _ := hex.DecodeString(o.SHA256)
		sec = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
		if dl, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(dl), time.Millisecond)
		}
	}
	cmd := exec.Command(o.Path, o.Args...)
	ownGroup(cmd)
	cmd.Env = append(cmd.Env, o.Env...)
	if o.SocketDir != "" {
		cmd.Env = append(cmd.Env, "PLUGIN_UNIX_SOCKET_DIR="+o.SocketDir)
	}
	pc := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginwire.Handshake,
		Plugins:          pluginwire.ClientSet(string(sdk.KindFlush), string(sdk.KindReplication), string(sdk.KindIndex)),
		Cmd:              cmd,
		SecureConfig:     sec,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           NewHCLogAdapter(logger, "plugin"),
		StartTimeout:     timeout,
		SyncStdout:       &lineWriter{log: logger, level: slog.LevelDebug, stream: "stdout"},
		SyncStderr:       &lineWriter{log: logger, level: slog.LevelDebug, stream: "stderr"},
		GRPCDialOptions:  []grpc.DialOption{pluginwire.CallOptions()},
	})
	type result struct {
		c   *Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := connect(ctx, pc, o.Path, logger)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			killGroup(cmd) // the handshake is over: cmd.Start has returned
			pc.Kill()
			if errors.Is(r.err, plugin.ErrChecksumsDoNotMatch) {
				// Replaced between CheckBinary and the start: say so as
				// CheckBinary would.
				if cerr := CheckBinary(o.Path, o.SHA256); cerr != nil {
					return nil, fmt.Errorf("dial plugin %s: %w", o.Path, cerr)
				}
			}
			return nil, r.err
		}
		r.c.socketDir, r.c.noLane, r.c.cmd = o.SocketDir, o.NoLane, cmd
		return r.c, nil
	case <-ctx.Done():
		go func() { <-ch; killGroup(cmd); pc.Kill() }()
		return nil, fmt.Errorf("dial plugin %s: %w", o.Path, ctx.Err())
	}
}

// connect performs the handshake, dispenses the base plugin and asks the
// binary to describe itself.
func connect(ctx context.Context, pc *plugin.Client, path string, logger *slog.Logger) (*Client, error) {
	cp, err := pc.Client()
	if err != nil {
		if he := handshakeError(path, err); he != nil {
			return nil, fmt.Errorf("dial plugin %s: %w", path, he)
		}
		return nil, fmt.Errorf("dial plugin %s: %w", path, err)
	}
	rpc, ok := cp.(*plugin.GRPCClient)
	if !ok {
		return nil, fmt.Errorf("dial plugin %s: not a gRPC plugin", path)
	}
	raw, err := rpc.Dispense(pluginwire.BaseName)
	if err != nil {
		return nil, fmt.Errorf("dial plugin %s: %w", path, err)
	}
	conn := raw.(*pluginwire.Conn)
	desc, err := pluginpb.NewPluginClient(conn.Conn).Describe(ctx, &pluginpb.Empty{})
	if err != nil {
		return nil, fmt.Errorf("dial plugin %s: describe: %w", path, pluginwire.FromStatus(err))
	}
	if desc.SdkVersion != sdk.Version {
		return nil, fmt.Errorf("dial plugin %s: %w", path, &HandshakeError{Path: path, PluginVersion: int(desc.SdkVersion)})
	}
	return &Client{pc: pc, rpc: rpc, conn: conn, desc: desc, path: path, log: logger}, nil
}

// Promotes reports whether the binary's replicator implements sdk.Promoter,
// as its answer to Describe at Dial said. (The host's remote replicator
// has a Promote method either way; a plugin without it answers
// sdk.ErrNotSupported.)
func (c *Client) Promotes() bool { return c.desc.GetPromote() }
