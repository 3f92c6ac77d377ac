package engine

import (
	"context"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Indexer is the index side of a cell: a dispatch listener the store feeds
// (see core.DispatchListener), started once the store is open (Start, with
// the cell's host) and closed exactly once after the store closed, or
// when the cell's set-up failed, whether or not Start was called (Close,
// which also ends what made it: an external process).
type Indexer interface {
	core.DispatchListener
	Start(ctx context.Context, host sdk.Host) error
	Close() error
}

// PluginIndexer adapts an sdk.Indexer that has been configured (a
// builtin, or a go-plugin client of an external one) to Indexer: dispatch
// goes through storehost.Listener, Start is the plugin's Start, Close the
// plugin's Stop and then release (which may be nil).
func PluginIndexer(ix sdk.Indexer, release func()) Indexer {
	if release == nil {
		release = func() {}
	}
	return &pluginIndexer{Listener: storehost.Listener{Indexer: ix}, ix: ix, release: release}
}

type pluginIndexer struct {
	storehost.Listener
	ix      sdk.Indexer
	release func()
}

func (p *pluginIndexer) Start(ctx context.Context, host sdk.Host) error { return p.ix.Start(ctx, host) }

func (p *pluginIndexer) Close() error {
	err := p.ix.Stop(context.Background())
	p.release()
	return err
}
