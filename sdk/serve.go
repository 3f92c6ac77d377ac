package sdk

import (
	"log/slog"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/keelmq/keel/internal/pluginwire"
)

// Serve serves p as an external plugin over hashicorp/go-plugin with gRPC
// and does not return while the host keeps the plugin running (go-plugin
// exits the process when the host closes it). Call it from a plugin
// binary's main:
//
//	func main() { sdk.Serve(myplugin.New()) }
//
// The binary serves every plugin kind p implements (FlushStrategy,
// Replicator, Indexer) and the optional interfaces it implements
// (StatusReporter, MetricsWriter, Promoter, ForceWriter); the host learns
// which at connect time. A binary serving several kinds shares the one
// value p among them: the host calls Configure, Start and Stop once per kind
// it uses.
//
// Logging: Serve points slog's default logger at stderr in hclog's JSON
// form, which the host re-emits into its own slog logger at each line's
// level (keys and values kept). Host.Log does the same through the host
// connection. Other output to stdout and stderr reaches the host's log at
// debug level.
//
// Run by hand (without the host's handshake cookie) it prints that it is a
// plugin and exits with status 1.
func Serve(p Plugin) {
	stderr := os.Stderr // go-plugin replaces os.Stderr with a pipe once serving
	slog.SetDefault(slog.New(NewPluginLogHandler(stderr, slog.LevelDebug)))
	srv := &pluginServer{p: p, hosts: map[Kind]*remoteHost{}}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pluginwire.Handshake,
		Plugins:         srv.pluginSet(),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return plugin.DefaultGRPCServer(append(opts, pluginwire.ServerOptions()...))
		},
		Logger: hclog.New(&hclog.LoggerOptions{Name: "go-plugin", Output: stderr, JSONFormat: true, Level: hclog.Info}),
	})
}
