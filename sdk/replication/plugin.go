package replication

import (
	"context"

	"github.com/keelmq/keel/sdk"
)

// Plugin is a replicator plugin made of a Node and the plugin's own
// decoding of its [replication.config] table: the shape of keel's async
// and sync plugins, and of a custom one that only chooses its Options. It
// implements sdk.Replicator, sdk.Promoter, sdk.ForceWriter,
// sdk.StatusReporter and sdk.MetricsWriter through the embedded Node.
type Plugin struct {
	*Node
	options func(cfg sdk.Config) (Options, error)
}

// NewPlugin returns an unconfigured Plugin whose Configure gets its Options
// from options. options decodes cfg strictly (DecodeConfig) and checks what
// is its own; its errors are returned as they are, so they must wrap
// sdk.ErrInvalidConfig and name the key.
func NewPlugin(options func(cfg sdk.Config) (Options, error)) *Plugin {
	return &Plugin{Node: NewNode(), options: options}
}

// Configure implements sdk.Plugin: the plugin's options, then Node.Setup
// (which validates them and fills the defaults).
func (p *Plugin) Configure(ctx context.Context, cfg sdk.Config) error {
	o, err := p.options(cfg)
	if err != nil {
		return err
	}
	return p.Node.Setup(cfg, o)
}
