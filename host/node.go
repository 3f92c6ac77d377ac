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
	"syscall"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/host/acl"
	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/host/namesrv"
	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/host/schedule"
	"github.com/keelmq/keel/host/storelock"
	"github.com/keelmq/keel/host/timer"
	"github.com/keelmq/keel/host/txn"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
	"golang.org/x/sys/unix"
)

// The roles, as host/profile spells them (one home: profile.RoleMaster
// and profile.RoleSlave).
const (
	roleMaster = profile.RoleMaster
	roleSlave  = profile.RoleSlave
)

// The process roles (server.roles), as host/profile spells them.
const (
	roleNamesrv    = profile.RoleNamesrv
	roleBroker     = profile.RoleBroker
	roleController = profile.RoleController
)

// Options are the process-level settings that are not in the profile.
type Options struct {
	// Logger for the node; nil means slog.Default().
	Logger *slog.Logger
	// Catalog is the builtin plugins the profile may name (keel's own is
	// internal/builtins.Catalog). Nil is an empty catalog: only external
	// plugins (path = ...) load.
	Catalog *Catalog
}

// Node is one running keel process.
type Node struct {
	prof    *profile.Profile
	log     *slog.Logger
	catalog *Catalog // the builtins the profile may name
	role    string   // the configured role; slave becomes master on Promote
	// peer is the master's HA address a slave follows (replication.master_addr,
	// or the controller's master in cluster mode); n.mu guards changes.
	peer string
	// cluster is this broker's membership of a controller group, nil
	// unless the profile is in cluster mode (cluster.go).
	cluster *clusterMember
	// slave is true while this node is a slave (appends refused). Promote
	// clears it; setSlave changes it and the write gate together.
	slave atomic.Bool
	// gate is whether sends may be written now, and if not why (gate.go).
	gate writeGate
	// pulls holds the pulls waiting for data, by queue (longpoll.go).
	pulls pullHolds

	store   *core.Store
	host    *storehost.Host
	plugins []*loadedPlugin
	flusher sdk.FlushStrategy
	repl    sdk.Replicator
	indexer sdk.Indexer

	flushPolicy sdk.FlushPolicy
	replPolicy  sdk.ReplicationPolicy
	ack         atomic.Pointer[storehost.AckPolicy] // the rule sends follow; setAckPolicy
	// confirmFloor is the committed offset at the last promotion (see
	// nodeConfirm).
	confirmFloor atomic.Int64

	metrics *nodeMetrics
	cache   *readCache // nil when store.read_cache is 0
	// The services only a master runs (masterservices.go): started and
	// stopped together by startMasterServices and stopMasterServices; nil
	// until the store is open. schedule delivers delayed messages; timer
	// delivers timer messages (nil while store.timer_enable is false;
	// timerRule is the put path's rule); txn decides transactional
	// messages and checks undecided ones (END_TRANSACTION is refused while
	// it does not run).
	schedule  *schedule.Service
	timer     *timer.Service
	timerRule timer.Rule
	txn       *txn.Service

	// nsrv is the name server (server.roles has namesrv), nil otherwise;
	// registrar keeps the broker registered with its name servers
	// (registration.go), nil without the broker role; stopWatch ends its
	// topic watch.
	nsrv      *namesrv.Server
	registrar *namesrv.Registrar
	stopWatch func()
	// ctl is the controller this process runs (server.roles has
	// controller), nil otherwise.
	ctl *controller.Controller

	mu        sync.Mutex
	listeners map[string]net.Listener // role → listener
	servers   []*remoting.Server
	broker    *remoting.Broker
	admin     *adminServer
	started   time.Time
	stopOnce  sync.Once

	// adminProbe holds the admin address from bindListeners until listen
	// starts the admin server on it.
	adminProbe net.Listener
	// lock is the data dir's lock file, held while the node runs.
	lock *storelock.Lock
	// served is set once Start succeeded.
	served bool
	// checkOnly is set for Check: plugins validate their configuration
	// without touching disk (see ConfigChecker).
	checkOnly bool
}

// Start binds the listen addresses, checks and locks the data dir (see
// LockFile), loads the plugins named by the profile, opens the store,
// starts the plugins and serves. The addresses are bound before anything
// touches the store, so a second node started on the same ports fails
// without reading (let alone recovering) a store another node is serving;
// the lock stops one on other ports. On error whatever was
// opened is closed again: started plugins are stopped, external plugin
// processes killed, the store closed (which removes the abort marker a
// start that never served would otherwise leave behind) and the
// listeners closed; the error names the cause in one line.
func Start(ctx context.Context, prof *profile.Profile, opts Options) (*Node, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	n := &Node{prof: prof, log: log, catalog: opts.Catalog, role: prof.Replication.Role, peer: prof.Replication.MasterAddr, listeners: map[string]net.Listener{}, started: time.Now()}
	if n.role == "" {
		n.role = roleMaster
	}
	n.setSlave(n.role == roleSlave)
	n.metrics = newMetrics(n)
	if err := n.start(ctx); err != nil {
		if cerr := n.abortStart(); cerr != nil {
			n.log.Error("closing after a failed start", "err", cerr)
		}
		return nil, err
	}
	n.served = true
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	if err := n.bindListeners(); err != nil {
		return err
	}
	if !n.prof.HasRole(roleBroker) {
		return n.listen() // no store, no plugins
	}
	if err := checkDataDir(n.prof.Store.Dir); err != nil {
		return err
	}
	if err := n.lockDataDir(); err != nil {
		return err
	}
	if n.prof.ClusterMode() {
		if err := n.joinCluster(ctx); err != nil {
			return err
		}
	}
	if err := n.loadPlugins(ctx); err != nil {
		return err
	}
	for _, lp := range n.plugins {
		lp.onState = func() { n.gate.update(n) }
	}
	if err := n.openStore(); err != nil {
		return err
	}
	n.schedule = n.newSchedule()
	n.timer, n.timerRule = n.newTimer()
	n.txn = n.newTxn()
	if err := n.startPlugins(ctx); err != nil {
		return err
	}
	if err := n.listen(); err != nil {
		return err
	}
	if !n.slave.Load() {
		if err := n.startMasterServices(); err != nil {
			return err
		}
	}
	if n.cluster != nil {
		n.cluster.serve()
	}
	return nil
}

// abortStart closes what a failed start opened, in Stop's order.
func (n *Node) abortStart() error {
	err := n.Stop(context.Background())
	if n.adminProbe != nil {
		n.adminProbe.Close()
	}
	return err
}

func (n *Node) openStore() error {
	p := n.prof
	var listeners []core.DispatchListener
	if n.indexer != nil {
		listeners = append(listeners, &storehost.Listener{Indexer: n.indexer, Unindexed: unindexed})
	}
	n.host = storehost.New(nil, n.log.With("component", "plugin"))
	n.host.OnFenceChange(func() { n.gate.update(n) })
	var confirm core.ConfirmSource
	if n.repl != nil {
		confirm = nodeConfirm{n}
	}
	o := core.Options{
		Dir:                 p.Store.Dir,
		Logger:              n.log,
		SegmentSize:         int64(p.Store.SegmentSize),
		MaxMessageSize:      int(p.Store.MaxMessageSize),
		CQEntriesPerFile:    p.Store.CQEntriesPerFile,
		DisableCRCOnRecover: !p.Store.CheckCRCOnRecover,
		RecoveryTail:        recoveryTail(p.Store.RecoveryTail),
		StallTimeout:        time.Duration(p.Store.StallTimeout),
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
		var ce *core.CorruptError
		if errors.As(err, &ce) {
			return fmt.Errorf("open store %s: %w; `keel store repair --dry-run %s` shows what it would cut", p.Store.Dir, err, p.Store.Dir)
		}
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

// bindListeners binds the name server and broker addresses, checks that
// the HA address is free when this node's replication plugin will listen
// on it, and holds the admin address until listen serves it. An address
// already taken fails with the profile key that names it.
func (n *Node) bindListeners() error {
	p := n.prof
	if p.HasRole(roleNamesrv) {
		l, err := listenOn("name server", "server.namesrv_addr", p.Server.NamesrvAddr)
		if err != nil {
			return err
		}
		n.listeners["namesrv"] = l
	}
	var err error
	if p.HasRole(roleBroker) {
		if err = n.bindBroker(); err != nil {
			return err
		}
	}
	if p.HasRole(roleController) {
		l, err := listenOn("controller", "controller.addr", p.Controller.Addr)
		if err != nil {
			return err
		}
		n.listeners["controller"] = l
	}
	if n.adminProbe, err = listenOn("admin", "admin.addr", p.Admin.Addr); err != nil {
		return err
	}
	return nil
}

// bindBroker binds the broker listener and probes the HA address.
func (n *Node) bindBroker() error {
	p := n.prof
	l, err := listenOn("broker", "server.broker_addr", p.Server.BrokerAddr)
	if err != nil {
		return err
	}
	n.listeners["broker"] = l
	if profile.Chosen(p.Replication.Plugin, p.Replication.Path) && n.role != roleSlave && p.Server.HAAddr != "" {
		// The replication plugin binds it when it starts; a probe now
		// turns "address in use" into a line naming the key, before the
		// store is touched.
		hl, err := listenOn("HA", "server.ha_addr", p.Server.HAAddr)
		if err != nil {
			return err
		}
		hl.Close()
	}
	return nil
}

// listenOn listens on addr, the value of the profile key key.
func listenOn(what, key, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		return l, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s listener: %s %s is already in use: another keel or RocketMQ is listening there; change %s or stop it", what, key, addr, key)
	}
	return nil, fmt.Errorf("%s listener: %s %s: %w", what, key, addr, err)
}

// checkDataDir makes sure the store directory exists (creating it) and
// that this process can list and create files in it, so that a bad
// store.dir fails in one line before plugins start.
func checkDataDir(dir string) error {
	if dir == "" {
		return errors.New("data dir: store.dir is empty")
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("data dir %s (store.dir) is a file, not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { // fails on a file too
		return fmt.Errorf("data dir %s (store.dir) cannot be created: %w", dir, err)
	}
	if _, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("data dir %s (store.dir) is not readable: %w", dir, err)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("data dir %s (store.dir) is not writable: %w", dir, err)
	}
	return nil
}

// lockDataDir takes the store directory's lock (package storelock), so
// that a second node never opens, recovers or closes a store another node
// serves.
func (n *Node) lockDataDir() error {
	dir := n.prof.Store.Dir
	l, err := storelock.Acquire(dir)
	var inUse *storelock.InUseError
	switch {
	case errors.As(err, &inUse):
		return fmt.Errorf("data dir %s (store.dir) is in use by another keel process (pid %s); stop it or choose another store.dir", dir, inUse.PID)
	case err != nil:
		return fmt.Errorf("data dir %s (store.dir): %w", dir, err)
	}
	n.lock = l
	return nil
}

// listen serves the name server and broker on the listeners bindListeners
// bound, starts the admin server, and logs one line per listener.
func (n *Node) listen() error {
	p := n.prof
	srvCfg := remoting.ServerConfig{
		MaxConns:    p.Server.MaxConnections,
		IdleTimeout: time.Duration(p.Server.IdleTimeout),
		MaxFrame:    int(p.Server.MaxFrameSize),
		// One budget for the broker and name server listeners together.
		Budget: remoting.NewBudget(int64(p.Server.RequestBufferBudget)),
		Logger: n.log.With("component", "remoting"),
	}
	if srvCfg.IdleTimeout == 0 {
		srvCfg.IdleTimeout = 100 * 365 * 24 * time.Hour // "0s" = never
	}
	if p.HasRole(roleNamesrv) {
		n.nsrv = n.newNameServer()
		nsSrv := remoting.NewServer(srvCfg)
		n.nsrv.Register(nsSrv)
		n.servers = append(n.servers, nsSrv)
		n.nsrv.Start()
		go nsSrv.Serve(n.listeners["namesrv"])
	}
	if p.HasRole(roleController) {
		if err := n.startController(context.Background(), srvCfg); err != nil {
			return err
		}
	}
	if p.HasRole(roleBroker) {
		if err := n.serveBroker(srvCfg); err != nil {
			return err
		}
	}

	// The admin server binds its own listener: hand the held address
	// over (the same port, also when admin.addr asked for port 0).
	addr := n.adminProbe.Addr().String()
	n.adminProbe.Close()
	n.adminProbe = nil
	adm, err := startAdmin(n, addr)
	if err != nil {
		return fmt.Errorf("%w (admin.addr %s)", err, p.Admin.Addr)
	}
	n.admin = adm
	n.mu.Lock()
	n.listeners["admin"] = adm.l // the registrar may read the map meanwhile
	n.mu.Unlock()
	for _, role := range []string{"namesrv", "controller", "broker", "admin"} {
		if l, ok := n.listeners[role]; ok {
			n.log.Info("listening", "role", role, "addr", l.Addr().String())
		}
	}
	if addr := n.haAddr(); addr != "" {
		n.log.Info("listening", "role", "ha", "addr", addr)
	}
	return nil
}

// serveBroker serves the broker protocol on the broker listener and
// starts keeping the broker registered with its name servers. With
// acl.enabled every request on it is checked first (package host/acl).
func (n *Node) serveBroker(srvCfg remoting.ServerConfig) error {
	p := n.prof
	policy, err := acl.New(p.ACL)
	if err != nil {
		return fmt.Errorf("broker access control: %w", err)
	}
	if policy != nil {
		srvCfg.Guard = policy.Check
	}
	n.broker = remoting.NewBroker(remoting.BrokerConfig{
		AutoCreateTopics:      p.Store.AutoCreateTopics,
		DefaultQueueNums:      int32(p.Store.DefaultQueues),
		DisablePropertyFilter: !p.Store.EnablePropertyFilter,
		Transactions:          n.transactions(),
		Logger:                n.log.With("component", "broker"),
	}, backend{n})
	brokerSrv := remoting.NewServer(srvCfg)
	n.broker.Register(brokerSrv)
	controller.RegisterBrokerRefusals(brokerSrv)
	if n.nsrv != nil {
		// The broker port also answers route lookups, so a client pointed
		// at the broker alone works too.
		n.nsrv.Register(brokerSrv)
	}
	n.servers = append(n.servers, brokerSrv)
	go brokerSrv.Serve(n.listeners["broker"])
	n.startRegistrar()
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
	if a := n.Addr("broker"); a != "" {
		return a
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

// Stop shuts down in order: the delay level delivery, listeners, replication, flush, the store
// (which flushes, dispatches, checkpoints and removes the abort marker),
// then the indexer, which the store's last dispatch still feeds.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	n.stopOnce.Do(func() {
		// Delayed deliveries stop first, while the store still takes
		// their appends and flushes them.
		if n.cluster != nil {
			// Heartbeats stop first: the controller elects another master
			// at once, while this one still flushes what it has.
			n.cluster.stop()
		}
		n.stopMasterServices()
		n.stopRegistrar(ctx) // while the name servers still answer
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
		// Listeners bound but not yet served (a failed start); closing
		// one a server already closed is harmless.
		for role, l := range n.listeners {
			if role != "admin" {
				l.Close()
			}
		}
		if n.nsrv != nil {
			n.nsrv.Close()
		}
		if n.ctl != nil {
			if err := n.ctl.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close the controller: %w", err))
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
		n.lock.Release()
		if n.served {
			n.log.Info("stopped")
		}
	})
	return errors.Join(errs...)
}

// pluginDataDir is where a plugin may keep files.
// Check (checkOnly) only names it: nothing is created.
func (n *Node) pluginDataDir(kind sdk.Kind) (string, error) {
	d := filepath.Join(n.prof.Store.Dir, "plugins", string(kind))
	if n.checkOnly {
		return d, nil
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("create plugin data dir: %w", err)
	}
	return d, nil
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// recoveryTail maps store.recovery_tail to core's option: 0 in a profile
// means no bound, which core spells as a negative value.
func recoveryTail(v profile.Size) int64 {
	if v == 0 {
		return -1
	}
	return int64(v)
}
