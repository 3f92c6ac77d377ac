package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Factory makes a fresh builtin plugin instance.
type Factory func() sdk.Plugin

// ConfigChecker is an optional interface of plugins, used by `keel profile
// check` (Check): CheckConfig validates cfg exactly as Configure would and
// applies it, so that AckPolicy and the like answer for it, but touches
// nothing on disk: cfg.DataDir may not exist and must be neither created
// nor read, and Start is never called afterwards (nor Stop). A plugin
// without it is checked with Configure against a fresh scratch DataDir
// that is removed afterwards, then stopped.
type ConfigChecker interface {
	CheckConfig(ctx context.Context, cfg sdk.Config) error
}

// Plugin states reported in /status and metrics.
const (
	stateRunning  = "running"
	stateDegraded = "degraded"
	stateStopped  = "stopped"
)

// loadedPlugin is one plugin instance and its lifecycle state.
type loadedPlugin struct {
	kind     sdk.Kind
	name     string
	external bool
	path     string
	p        sdk.Plugin
	cfg      sdk.Config
	// scratch is the throwaway DataDir Check configured the plugin with
	// ("" when it implements ConfigChecker or for a node).
	scratch string

	mu     sync.Mutex
	state  string
	reason string
	since  time.Time
	// onState, when set, runs after every state change (the node's write
	// gate recomputes); set before the plugin starts.
	onState func()
}

func (lp *loadedPlugin) setState(state, reason string) {
	lp.mu.Lock()
	lp.state, lp.reason, lp.since = state, reason, time.Now()
	lp.mu.Unlock()
	if lp.onState != nil {
		lp.onState()
	}
}

func (lp *loadedPlugin) getState() (string, string) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.state, lp.reason
}

func (lp *loadedPlugin) stop(ctx context.Context) error {
	if st, _ := lp.getState(); st == stateStopped {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := lp.p.Stop(sctx)
	lp.setState(stateStopped, "")
	if err != nil {
		return fmt.Errorf("stop %s plugin %s: %w", lp.kind, lp.name, err)
	}
	return nil
}

func (n *Node) plugin(kind sdk.Kind) *loadedPlugin {
	for _, lp := range n.plugins {
		if lp.kind == kind {
			return lp
		}
	}
	return nil
}

// loadPlugins instantiates and configures the profile's plugins and reads
// their policies; the store is opened with those policies afterwards.
func (n *Node) loadPlugins(ctx context.Context) error {
	for _, s := range n.pluginSections() {
		if !profile.Chosen(s.name, s.path) {
			if s.kind == sdk.KindFlush {
				return fmt.Errorf("%s: flush.plugin: a flush strategy is required (builtins: %s)", n.prof.File, strings.Join(n.catalog.Names(sdk.KindFlush), ", "))
			}
			continue
		}
		if err := n.loadPlugin(ctx, s); err != nil {
			return err
		}
	}
	// One acknowledgement rule from the two policies, defaults filled
	// (before anything serves: no lock needed for the plain fields).
	ack := storehost.NewAckPolicy(n.flushPolicy, n.replPolicy)
	n.flushPolicy, n.replPolicy = ack.Flush, ack.Replication
	n.ack.Store(&ack)
	return nil
}

// pluginSection is what a profile says of one plugin kind: a builtin's
// name, or an external plugin's path and expected SHA-256.
type pluginSection struct {
	kind             sdk.Kind
	name, path, hash string
}

// pluginSections lists the profile's plugin sections in load order.
func (n *Node) pluginSections() []pluginSection {
	p := n.prof
	return []pluginSection{
		{sdk.KindFlush, p.Flush.Plugin, p.Flush.Path, p.Flush.SHA256},
		{sdk.KindIndex, p.Index.Plugin, p.Index.Path, p.Index.SHA256},
		{sdk.KindReplication, p.Replication.Plugin, p.Replication.Path, p.Replication.SHA256},
	}
}

// loadPlugin instantiates the plugin section s chooses, registers it with
// the node, configures it (or checks its configuration, for Check) and
// adopts it as the node's plugin of its kind.
func (n *Node) loadPlugin(ctx context.Context, s pluginSection) error {
	lp, err := n.instantiate(ctx, s)
	if err != nil {
		return err
	}
	// Registered before Configure so a failure below still stops it
	// (an external plugin's process must not outlive a failed start).
	n.plugins = append(n.plugins, lp)
	lp.setState("configured", "")
	cfg, err := n.pluginConfig(s.kind)
	if err != nil {
		return err
	}
	lp.cfg = cfg
	if n.checkOnly {
		err = n.checkConfig(ctx, lp, cfg)
	} else {
		err = lp.p.Configure(ctx, cfg)
	}
	if err != nil {
		return fmt.Errorf("configure %s plugin %s: %w", s.kind, lp.name, err)
	}
	return n.adopt(lp)
}

// instantiate makes the plugin s names: an external plugin's process
// (named by its path) or a fresh instance of a builtin from the catalog.
func (n *Node) instantiate(ctx context.Context, s pluginSection) (*loadedPlugin, error) {
	lp := &loadedPlugin{kind: s.kind, name: s.name, path: s.path}
	if s.path != "" {
		pl, err := n.loadExternal(ctx, s.kind, n.prof.ResolvePath(s.path), s.hash)
		if err != nil {
			return nil, err
		}
		lp.p, lp.external, lp.name = pl, true, s.path
		return lp, nil
	}
	f, ok := n.catalog.Lookup(s.kind, s.name)
	if !ok {
		return nil, fmt.Errorf("%s: %s.plugin: unknown builtin %q (builtins: %s)", n.prof.File, s.kind, s.name, strings.Join(n.catalog.Names(s.kind), ", "))
	}
	lp.p = f()
	return lp, nil
}

// adopt makes the configured plugin lp the node's plugin of its kind and
// reads its policy; it fails when lp does not implement its kind's
// interface.
func (n *Node) adopt(lp *loadedPlugin) error {
	switch lp.kind {
	case sdk.KindFlush:
		fs, ok := lp.p.(sdk.FlushStrategy)
		if !ok {
			return fmt.Errorf("%s plugin %s is not a flush strategy", lp.kind, lp.name)
		}
		n.flusher, n.flushPolicy = fs, fs.AckPolicy()
	case sdk.KindIndex:
		ix, ok := lp.p.(sdk.Indexer)
		if !ok {
			return fmt.Errorf("%s plugin %s is not an indexer", lp.kind, lp.name)
		}
		n.indexer = ix
	case sdk.KindReplication:
		r, ok := lp.p.(sdk.Replicator)
		if !ok {
			return fmt.Errorf("%s plugin %s is not a replicator", lp.kind, lp.name)
		}
		n.repl, n.replPolicy = r, r.AckPolicy()
		if n.role == roleSlave {
			// A slave acks nothing itself.
			n.replPolicy = sdk.ReplicationPolicy{}
		}
	}
	return nil
}

// checkConfig validates a plugin's configuration for Check without
// touching the store: through ConfigChecker when the plugin has it,
// otherwise with Configure on a scratch data dir.
func (n *Node) checkConfig(ctx context.Context, lp *loadedPlugin, cfg sdk.Config) error {
	if cc, ok := lp.p.(ConfigChecker); ok {
		return cc.CheckConfig(ctx, cfg)
	}
	dir, err := os.MkdirTemp("", "keel-check-"+string(lp.kind)+"-")
	if err != nil {
		return fmt.Errorf("scratch data dir: %w", err)
	}
	lp.scratch = dir
	cfg.DataDir = dir
	return lp.p.Configure(ctx, cfg)
}

// pluginConfig builds the sdk.Config a plugin of kind receives.
func (n *Node) pluginConfig(kind sdk.Kind) (sdk.Config, error) {
	dir, err := n.pluginDataDir(kind)
	if err != nil {
		return sdk.Config{}, err
	}
	cfg := n.prof.PluginConfig(string(kind))
	cfg.DataDir = dir
	if kind == sdk.KindReplication {
		cfg.Role = n.role
		cfg.Addr = n.prof.Server.HAAddr
		cfg.PeerAddr = n.peerAddr()
		cfg.Secret = n.prof.Replication.Secret
	}
	return cfg, nil
}

// startPlugins starts the plugins in order: flush, index, replication.
func (n *Node) startPlugins(ctx context.Context) error {
	for _, kind := range []sdk.Kind{sdk.KindFlush, sdk.KindIndex, sdk.KindReplication} {
		lp := n.plugin(kind)
		if lp == nil {
			continue
		}
		if err := lp.p.Start(ctx, n.host); err != nil {
			return fmt.Errorf("start %s plugin %s: %w", kind, lp.name, err)
		}
		lp.setState(stateRunning, "")
		n.log.Info("plugin started", "kind", kind, "name", lp.name, "external", lp.external)
	}
	return nil
}

// pluginsDegraded returns why writes must be refused because a plugin the
// ack path depends on is down, or "".
func (n *Node) pluginsDegraded() string {
	for _, lp := range n.plugins {
		if lp.kind == sdk.KindIndex {
			continue // queries fail, writes go on; dispatch retries
		}
		if st, why := lp.getState(); st == stateDegraded {
			return fmt.Sprintf("%s plugin %s is down: %s", lp.kind, lp.name, why)
		}
	}
	return ""
}

// pluginStatus returns a plugin's StatusReporter output, or nil.
func (n *Node) pluginStatus(p sdk.Plugin) map[string]any {
	sr, ok := p.(sdk.StatusReporter)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b, err := sr.Status(ctx)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return map[string]any{"raw": string(b)}
	}
	return m
}
