// Package host is keel's process: it loads a profile, opens the core store,
// loads the flush, replication and index plugins (builtin or external),
// and serves the RocketMQ remoting protocol, the admin HTTP API (/metrics,
// /status, /debug/pprof) and plugin lifecycles.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

const (
	roleMaster = "master"
	roleSlave  = "slave"
)

// Options are the process-level settings that are not in the profile.
type Options struct {
	// Logger for the node; nil means slog.Default().
	Logger *slog.Logger
}

// Node is one running keel process.
type Node struct {
	prof *profile.Profile
	log  *slog.Logger
	role string // the configured role; slave becomes master on Promote
	// slave is true while this node is a slave (appends refused). Promote
	// clears it.
	slave atomic.Bool

	store   *core.Store
	host    *storehost.Host
	plugins []*loadedPlugin
	flusher sdk.FlushStrategy
	repl    sdk.Replicator
	indexer sdk.Indexer

	flushPolicy sdk.FlushPolicy
	replPolicy  sdk.ReplicationPolicy

	metrics *nodeMetrics
	cache   *readCache // nil when store.read_cache is 0

	mu        sync.Mutex
	listeners map[string]net.Listener // role → listener
	servers   []*remoting.Server
	broker    *remoting.Broker
	admin     *adminServer
	started   time.Time
	stopOnce  sync.Once
}

// Start loads the plugins named by the profile, opens the store, starts
// the plugins and the listeners. On error everything started is stopped.
func Start(ctx context.Context, prof *profile.Profile, opts Options) (n *Node, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	n = &Node{prof: prof, log: log, role: prof.Replication.Role, listeners: map[string]net.Listener{}, started: time.Now()}
	if n.role == "" {
		n.role = roleMaster
	}
	n.slave.Store(n.role == roleSlave)
	n.metrics = newMetrics(n)
	defer func() {
		if err != nil {
			n.Stop(context.Background())
		}
	}()
	if err := n.loadPlugins(ctx); err != nil {
		return nil, err
	}
	if err := n.openStore(); err != nil {
		return nil, err
	}
	if err := n.startPlugins(ctx); err != nil {
		return nil, err
	}
	if err := n.listen(); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Node) openStore() error {
	p := n.prof
	var listeners []core.DispatchListener
	if n.indexer != nil {
		listeners = append(listeners, &storehost.Listener{Indexer: n.indexer})
	}
	n.host = storehost.New(nil, n.log.With("component", "plugin"))
	var confirm core.ConfirmSource
	if n.replPolicy.VisibleAfterReplicated {
		confirm = n.host
	}
	o := core.Options{
		Dir:                 p.Store.Dir,
		Logger:              n.log,
		SegmentSize:         int64(p.Store.SegmentSize),
		MaxMessageSize:      int(p.Store.MaxMessageSize),
		CQEntriesPerFile:    p.Store.CQEntriesPerFile,
		DisableCRCOnRecover: !p.Store.CheckCRCOnRecover,
		Confirm:             confirm,
		Listeners:           listeners,
		OnFlush:             n.metrics.onFlush,
		Retention: core.RetentionOptions{
			FileReservedTime:   time.Duration(p.Store.FileReservedTime),
			DeleteWhen:         p.Store.DeleteHours(),
			DiskMaxUsedRatio:   float64(p.Store.DiskMaxUsedRatio),
			CleanForciblyRatio: float64(p.Store.DiskCleanForciblyRatio),
			WarningRatio:       float64(p.Store.DiskWarningRatio),
		},
	}
	storehost.ApplyFlushPolicy(&o, n.flushPolicy)
	s, err := core.Open(o)
	if err != nil {
		return fmt.Errorf("open store %s: %w", p.Store.Dir, err)
	}
	if n.cache, err = newReadCache(int64(p.Store.ReadCache)); err != nil {
		s.Close()
		return err
	}
	n.store = s
	n.host.SetStore(s)
	return nil
}

// listen opens the name server, broker and admin listeners and logs one
// line per listener.
func (n *Node) listen() error {
	p := n.prof
	srvCfg := remoting.ServerConfig{
		MaxConns:    p.Server.MaxConnections,
		IdleTimeout: time.Duration(p.Server.IdleTimeout),
		MaxFrame:    int(p.Server.MaxFrameSize),
		Logger:      n.log.With("component", "remoting"),
	}
	if srvCfg.IdleTimeout == 0 {
		srvCfg.IdleTimeout = 100 * 365 * 24 * time.Hour // "0s" = never
	}
	be := backend{n}
	n.broker = remoting.NewBroker(remoting.BrokerConfig{
		AutoCreateTopics: p.Store.AutoCreateTopics,
		DefaultQueueNums: int32(p.Store.DefaultQueues),
		Logger:           n.log.With("component", "broker"),
	}, be)
	ns := remoting.NewNameServer(remoting.NameServerConfig{
		AutoCreateTopics: p.Store.AutoCreateTopics,
		DefaultQueueNums: int32(p.Store.DefaultQueues),
		Logger:           n.log.With("component", "namesrv"),
	}, be)

	bl, err := net.Listen("tcp", p.Server.BrokerAddr)
	if err != nil {
		return fmt.Errorf("broker listener on %s: %w", p.Server.BrokerAddr, err)
	}
	n.listeners["broker"] = bl
	brokerSrv := remoting.NewServer(srvCfg)
	n.broker.Register(brokerSrv)
	n.servers = append(n.servers, brokerSrv)
	if p.Server.NamesrvAddr != "" {
		nl, err := net.Listen("tcp", p.Server.NamesrvAddr)
		if err != nil {
			return fmt.Errorf("name server listener on %s: %w", p.Server.NamesrvAddr, err)
		}
		n.listeners["namesrv"] = nl
		nsSrv := remoting.NewServer(srvCfg)
		ns.Register(nsSrv)
		n.servers = append(n.servers, nsSrv)
		go nsSrv.Serve(nl)
	}
	go brokerSrv.Serve(bl)
	// The broker port also answers route lookups, so a client pointed at
	// the broker alone works too.
	ns.Register(brokerSrv)

	adm, err := startAdmin(n, p.Admin.Addr)
	if err != nil {
		return err
	}
	n.admin = adm
	n.listeners["admin"] = adm.l
	for _, role := range []string{"namesrv", "broker", "admin"} {
		if l, ok := n.listeners[role]; ok {
			n.log.Info("listening", "role", role, "addr", l.Addr().String())
		}
	}
	if addr := n.haAddr(); addr != "" {
		n.log.Info("listening", "role", "ha", "addr", addr)
	}
	return nil
}

// haAddr is the replication plugin's listen address, if it reports one in
// its status ("addr").
func (n *Node) haAddr() string {
	if n.repl == nil || n.slave.Load() {
		return ""
	}
	st := n.pluginStatus(n.repl)
	if a, ok := st["addr"].(string); ok {
		return a
	}
	return ""
}

// advertised is the broker address clients should use.
func (n *Node) advertised() string {
	if l, ok := n.listeners["broker"]; ok {
		return l.Addr().String()
	}
	return n.prof.Server.BrokerAddr
}

// Addr returns the bound address of a listener role ("namesrv", "broker",
// "admin"), or "".
func (n *Node) Addr(role string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.listeners[role]; ok {
		return l.Addr().String()
	}
	return ""
}

// Store is the node's store.
func (n *Node) Store() *core.Store { return n.store }

// Stop shuts down in order: listeners, replication, flush, the store
// (which flushes, dispatches, checkpoints and removes the abort marker),
// then the indexer, which the store's last dispatch still feeds.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	n.stopOnce.Do(func() {
		if n.broker != nil {
			// Held long polls are answered first; give the connection
			// writers a moment to send those answers before closing.
			n.broker.Close()
			time.Sleep(50 * time.Millisecond)
		}
		for _, s := range n.servers {
			if err := s.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if n.admin != nil {
			n.admin.close()
		}
		for _, kind := range []sdk.Kind{sdk.KindReplication, sdk.KindFlush} {
			if lp := n.plugin(kind); lp != nil {
				if err := lp.stop(ctx); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if n.store != nil {
			if err := n.store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close store: %w", err))
			}
		}
		if lp := n.plugin(sdk.KindIndex); lp != nil {
			if err := lp.stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		// External plugins that were configured but never started (a
		// failed start) still have a process to end.
		for _, lp := range n.plugins {
			if sv := supervisorOf(lp.p); sv != nil {
				sv.Stop(ctx)
			}
		}
		n.cache.close()
		n.log.Info("stopped")
	})
	return errors.Join(errs...)
}

// pluginDataDir is where a plugin may keep files.
func (n *Node) pluginDataDir(kind sdk.Kind) (string, error) {
	d := filepath.Join(n.prof.Store.Dir, "plugins", string(kind))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("create plugin data dir: %w", err)
	}
	return d, nil
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
