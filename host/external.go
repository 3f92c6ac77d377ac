package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/keelmq/keel/internal/pluginrpc"
	"github.com/keelmq/keel/sdk"
)

// supervisor owns one external plugin process: it watches for the
// process's exit, marks the plugin degraded (so waits that depend on it
// fail with a clear status instead of hanging), and restarts it with
// exponential backoff, configuring and starting the new process exactly as
// the first. Health pings detect a hung process.
type supervisor struct {
	n    *Node
	kind sdk.Kind
	path string
	hash string
	lp   *loadedPlugin

	mu      sync.RWMutex
	client  *pluginrpc.Client
	cur     sdk.Plugin
	host    sdk.Host
	started bool
	stopped bool

	stop     chan struct{}
	wg       sync.WaitGroup
	restarts int
	// lastCrash and lastRestart are the times of the last detected exit
	// and the last successful restart (for /status and the bench).
	lastCrash, lastRestart time.Time
	detectLatency          time.Duration
}

// PingEvery is the health-check interval of external plugins.
var PingEvery = time.Second

func (n *Node) loadExternal(ctx context.Context, kind sdk.Kind, path, hash string) (sdk.Plugin, error) {
	if err := checkPluginBinary(kind, path, hash); err != nil {
		return nil, err
	}
	sv := &supervisor{n: n, kind: kind, path: path, hash: hash, stop: make(chan struct{})}
	if err := sv.dial(ctx); err != nil {
		return nil, err
	}
	switch kind {
	case sdk.KindFlush:
		return &extFlush{sv}, nil
	case sdk.KindIndex:
		return &extIndex{sv}, nil
	case sdk.KindReplication:
		return &extRepl{sv}, nil
	}
	return nil, fmt.Errorf("unknown plugin kind %q", kind)
}

// checkPluginBinary checks, before anything is started, that the binary
// of an external plugin exists, is an executable file and matches its
// sha256 pin (pluginrpc.CheckBinary), and says which profile key to fix
// when not. (pluginrpc.Dial checks again when it starts the process.)
func checkPluginBinary(kind sdk.Kind, path, pin string) error {
	err := pluginrpc.CheckBinary(path, pin)
	var ce *pluginrpc.ChecksumError
	var pe *pluginrpc.PinError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return fmt.Errorf("%s.sha256: external %s plugin binary %s has sha256 %s but the profile pins %s: it was rebuilt or replaced; if that was intended, set %s.sha256 = %q in the profile, otherwise rebuild it from the source the pin was made for, or do not run it",
			kind, kind, path, ce.Got, ce.Want, kind, ce.Got)
	case errors.As(err, &pe):
		return fmt.Errorf("%s.sha256: %w", kind, err)
	default:
		return fmt.Errorf("%s.path: external %s %w", kind, kind, err)
	}
}

// dial starts the process and takes the kind's remote.
func (sv *supervisor) dial(ctx context.Context) error {
	c, err := pluginrpc.Dial(ctx, pluginrpc.DialOptions{Path: sv.path, SHA256: sv.hash,
		Logger: sv.n.log.With("plugin", sv.path, "kind", sv.kind)})
	if err != nil {
		return fmt.Errorf("load external %s plugin: %w", sv.kind, err) // err names the path
	}
	var p sdk.Plugin
	switch sv.kind {
	case sdk.KindFlush:
		p, err = c.FlushStrategy()
	case sdk.KindIndex:
		p, err = c.Indexer()
	case sdk.KindReplication:
		p, err = c.Replicator()
	}
	if err != nil {
		c.Kill()
		return fmt.Errorf("external plugin %s does not serve a %s plugin: %w", sv.path, sv.kind, err)
	}
	sv.mu.Lock()
	sv.client, sv.cur = c, p
	sv.mu.Unlock()
	return nil
}

func (sv *supervisor) plugin() (sdk.Plugin, error) {
	sv.mu.RLock()
	defer sv.mu.RUnlock()
	if sv.cur == nil {
		return nil, fmt.Errorf("%w: external %s plugin %s is restarting", sdk.ErrUnavailable, sv.kind, sv.path)
	}
	return sv.cur, nil
}

func (sv *supervisor) Configure(ctx context.Context, cfg sdk.Config) error {
	p, err := sv.plugin()
	if err != nil {
		return err
	}
	return p.Configure(ctx, cfg)
}

func (sv *supervisor) Start(ctx context.Context, host sdk.Host) error {
	p, err := sv.plugin()
	if err != nil {
		return err
	}
	if err := p.Start(ctx, host); err != nil {
		return err
	}
	sv.mu.Lock()
	sv.host, sv.started = host, true
	sv.lp = sv.n.plugin(sv.kind)
	sv.mu.Unlock()
	sv.wg.Add(1)
	go sv.watch()
	return nil
}

func (sv *supervisor) Stop(ctx context.Context) error {
	sv.mu.Lock()
	if sv.stopped {
		sv.mu.Unlock()
		return nil
	}
	sv.stopped = true
	close(sv.stop)
	p, c := sv.cur, sv.client
	sv.mu.Unlock()
	sv.wg.Wait()
	var err error
	if p != nil {
		err = p.Stop(ctx)
	}
	if c != nil {
		c.Kill()
	}
	return err
}

// watch waits for the process to exit (or stop answering pings) and
// restarts it.
func (sv *supervisor) watch() {
	defer sv.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		sv.mu.RLock()
		c := sv.client
		sv.mu.RUnlock()
		t := time.NewTicker(PingEvery)
		dead := false
		var exitAt time.Time
		for !dead {
			select {
			case <-sv.stop:
				t.Stop()
				return
			case <-c.Done():
				dead, exitAt = true, time.Now()
			case <-t.C:
				if err := c.Ping(); err != nil {
					dead, exitAt = true, time.Now()
					sv.n.log.Error("external plugin stopped answering pings", "kind", sv.kind, "path", sv.path, "err", err)
				}
			}
		}
		t.Stop()
		c.Kill()
		sv.mu.Lock()
		sv.cur = nil
		sv.lastCrash = exitAt
		sv.mu.Unlock()
		if sv.lp != nil {
			sv.lp.setState(stateDegraded, "process exited; restarting")
		}
		sv.n.metrics.pluginCrashes.Inc()
		sv.n.log.Error("external plugin exited; restarting", "kind", sv.kind, "path", sv.path, "backoff", backoff)
		for {
			select {
			case <-sv.stop:
				return
			case <-time.After(backoff):
			}
			err := sv.restart()
			if err == nil {
				backoff = 100 * time.Millisecond
				break
			}
			sv.n.log.Error("restarting external plugin failed", "kind", sv.kind, "path", sv.path, "err", err)
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

func (sv *supervisor) restart() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sv.dial(ctx); err != nil {
		return err
	}
	p, _ := sv.plugin()
	if p == nil {
		return errors.New("plugin vanished during restart")
	}
	if err := p.Configure(ctx, sv.lp.cfg); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	sv.mu.RLock()
	host := sv.host
	sv.mu.RUnlock()
	if err := p.Start(ctx, host); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	sv.mu.Lock()
	sv.restarts++
	sv.lastRestart = time.Now()
	sv.mu.Unlock()
	if sv.kind == sdk.KindIndex && sv.n.store != nil {
		// The dead process lost what it had indexed but not synced.
		sv.n.store.RedispatchFromCheckpoint()
	}
	sv.lp.setState(stateRunning, "")
	sv.n.metrics.pluginRestarts.Inc()
	sv.n.log.Info("external plugin restarted", "kind", sv.kind, "path", sv.path, "down_for", time.Since(sv.lastCrash))
	return nil
}

// processInfo reports the plugin process's pid (0 while restarting), the
// number of restarts, and the last crash-to-detection and
// crash-to-restart latencies.
func (sv *supervisor) processInfo() (pid, restarts int, lastCrash, lastRestart time.Time) {
	sv.mu.RLock()
	defer sv.mu.RUnlock()
	if sv.client != nil && sv.cur != nil {
		pid = sv.client.Pid()
	}
	return pid, sv.restarts, sv.lastCrash, sv.lastRestart
}

// optionalOf returns the current process's plugin as the optional
// interface T: sv.plugin's error while it restarts, sdk.ErrNotSupported
// when the plugin is not a T.
func optionalOf[T any](sv *supervisor) (T, error) {
	var t T
	p, err := sv.plugin()
	if err != nil {
		return t, err
	}
	t, ok := p.(T)
	if !ok {
		return t, sdk.ErrNotSupported
	}
	return t, nil
}

// Status implements sdk.StatusReporter by forwarding.
func (sv *supervisor) Status(ctx context.Context) ([]byte, error) {
	sr, err := optionalOf[sdk.StatusReporter](sv)
	if err != nil {
		return nil, err
	}
	return sr.Status(ctx)
}

// WriteMetrics implements sdk.MetricsWriter by forwarding.
func (sv *supervisor) WriteMetrics(ctx context.Context) ([]byte, error) {
	mw, err := optionalOf[sdk.MetricsWriter](sv)
	if err != nil {
		return nil, err
	}
	return mw.WriteMetrics(ctx)
}

type extFlush struct{ *supervisor }

func (e *extFlush) AckPolicy() sdk.FlushPolicy {
	p, err := e.plugin()
	if err != nil {
		return sdk.FlushPolicy{}
	}
	return p.(sdk.FlushStrategy).AckPolicy()
}

type extRepl struct{ *supervisor }

func (e *extRepl) AckPolicy() sdk.ReplicationPolicy {
	p, err := e.plugin()
	if err != nil {
		return sdk.ReplicationPolicy{}
	}
	return p.(sdk.Replicator).AckPolicy()
}

// promotes reports whether the plugin implements sdk.Promoter, as its
// handshake declared (extRepl has a Promote method either way).
func (e *extRepl) promotes() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.client != nil && e.client.Promotes()
}

func (e *extRepl) Promote(ctx context.Context) (int32, error) {
	pr, err := optionalOf[sdk.Promoter](e.supervisor)
	if err != nil {
		return 0, err
	}
	return pr.Promote(ctx)
}

func (e *extRepl) ForceWrites(ctx context.Context) error {
	fw, err := optionalOf[sdk.ForceWriter](e.supervisor)
	if err != nil {
		return err
	}
	return fw.ForceWrites(ctx)
}

type extIndex struct{ *supervisor }

func (e *extIndex) Index(ctx context.Context, batch []sdk.Record) error {
	p, err := e.plugin()
	if err != nil {
		return err
	}
	return p.(sdk.Indexer).Index(ctx, batch)
}

func (e *extIndex) Sync(ctx context.Context) error {
	p, err := e.plugin()
	if err != nil {
		return err
	}
	return p.(sdk.Indexer).Sync(ctx)
}

func (e *extIndex) Query(ctx context.Context, q sdk.Query) ([]int64, error) {
	p, err := e.plugin()
	if err != nil {
		return nil, err
	}
	return p.(sdk.Indexer).Query(ctx, q)
}

func supervisorOf(p sdk.Plugin) *supervisor {
	switch e := p.(type) {
	case *extFlush:
		return e.supervisor
	case *extIndex:
		return e.supervisor
	case *extRepl:
		return e.supervisor
	}
	return nil
}
