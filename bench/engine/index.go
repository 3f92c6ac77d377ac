package engine

import (
	"context"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Indexer is the index side of a cell: a dispatch listener the store feeds
// (see core.DispatchListener), started once the store is open (Start, with
// the cell's host) and closed after the store closed (Close).
type Indexer interface {
	core.DispatchListener
	Start(ctx context.Context, host sdk.Host) error
	Close() error
}

// PluginIndexer adapts an sdk.Indexer that has been configured (a
// builtin, or a go-plugin client of an external one) to Indexer: dispatch
// goes through storehost.Listener, Start and Close are the plugin's Start
// and Stop.
func PluginIndexer(ix sdk.Indexer) Indexer {
	return &pluginIndexer{Listener: storehost.Listener{Indexer: ix}, ix: ix}
}

type pluginIndexer struct {
	storehost.Listener
	ix sdk.Indexer
}

func (p *pluginIndexer) Start(ctx context.Context, host sdk.Host) error { return p.ix.Start(ctx, host) }

func (p *pluginIndexer) Close() error { return p.ix.Stop(context.Background()) }

// IndexFactory makes a fresh Indexer keeping its files in dir (which
// exists) for one run.
type IndexFactory func(dir string) (Indexer, error)

// IndexImpl is a registered index implementation.
type IndexImpl struct {
	New  IndexFactory
	Impl string // what runs, for the report ("plugin")
}

var indexReg = map[[2]string]IndexImpl{}

// RegisterIndex makes name (an index axis value other than "none") in
// mode run with f; a later registration replaces an earlier one.
func RegisterIndex(name, mode, impl string, f IndexFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	indexReg[[2]string{name, mode}] = IndexImpl{New: f, Impl: impl}
}

// LookupIndex returns the registered implementation.
func LookupIndex(name, mode string) (IndexImpl, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	r, ok := indexReg[[2]string{name, mode}]
	return r, ok
}
