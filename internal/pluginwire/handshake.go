package pluginwire

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the plugin protocol version (exported as sdk.Version).
// go-plugin refuses a binary speaking another version at handshake.
const ProtocolVersion = 1

// Handshake is the go-plugin handshake between keel hosts and plugin
// binaries. The magic cookie (a UX guard against running a plugin binary
// by hand, not a security measure) never changes.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "KEEL_PLUGIN",
	MagicCookieValue: "7f3c9e1a-keel-storage-plugin",
}

// BaseName is the go-plugin plugin every binary serves (the Plugin
// service: Describe, Status, WriteMetrics). The other plugins are named by
// their sdk.Kind and served when the binary's value implements that kind.
const BaseName = "keel"

// Plugin is the go-plugin glue of one plugin name. On the plugin end
// Register registers its gRPC service; on the host end (Register nil)
// Dispense hands back a *Conn.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Register func(b *plugin.GRPCBroker, s *grpc.Server)
}

// Conn is what the host end gets from Dispense: the connection to the
// plugin process, its broker (for the Host callback connection) and a
// context that go-plugin cancels when the process exits.
type Conn struct {
	Done   context.Context
	Broker *plugin.GRPCBroker
	Conn   *grpc.ClientConn
}

// GRPCServer implements plugin.GRPCPlugin.
func (p *Plugin) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Register == nil {
		return errors.New("keel plugin: no service to serve")
	}
	p.Register(b, s)
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (p *Plugin) GRPCClient(ctx context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Conn{Done: ctx, Broker: b, Conn: c}, nil
}

// ClientSet is the plugin set the host end dials with: BaseName and the
// given kind names.
func ClientSet(kinds ...string) plugin.PluginSet {
	set := plugin.PluginSet{BaseName: &Plugin{}}
	for _, k := range kinds {
		set[k] = &Plugin{}
	}
	return set
}
