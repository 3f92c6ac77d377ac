package pluginrpc

import (
	"github.com/keelmq/keel/internal/commitpage"
	"github.com/keelmq/keel/sdk"
)

// committedMirror is a Host whose store can mirror its committed offset
// (storehost.Host: core.Store.MirrorCommitted).
type committedMirror interface {
	MirrorCommitted(fn func(committed int64)) (stop func())
}

// sharedPage is a committed-offset page (package internal/commitpage) the
// host keeps current while one plugin runs.
type sharedPage struct {
	w    *commitpage.Writer
	stop func()
}

// openPage creates a page in dir kept with host's committed offset, or
// returns nil when host cannot mirror it or the page cannot be made (the
// plugin then asks for the offset with calls, as without a page).
func (r *remotePlugin) openPage(dir string, host sdk.Host) *sharedPage {
	m, ok := host.(committedMirror)
	if !ok {
		return nil
	}
	w, err := commitpage.Create(dir)
	if err != nil {
		r.c.log.Warn("committed-offset page unavailable: the plugin asks for the offset with calls", "kind", r.kind, "err", err)
		return nil
	}
	return &sharedPage{w: w, stop: m.MirrorCommitted(w.Store)}
}

// close stops the mirror and removes the page. Safe on nil.
func (p *sharedPage) close() {
	if p == nil {
		return
	}
	p.stop()
	_ = p.w.Close()
}
