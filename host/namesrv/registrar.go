package namesrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// Registrar defaults: RocketMQ's registerNameServerPeriod, and a per-call
// bound well below it.
const (
	DefaultRegisterInterval = 30 * time.Second
	DefaultRegisterTimeout  = 3 * time.Second
)

// failureLogEvery bounds how often the registrar logs a name server that
// keeps failing (the first failure and a recovery are always logged).
const failureLogEvery = time.Minute

// RegistrarSource supplies what a broker registers. It must be safe for
// concurrent use.
type RegistrarSource interface {
	// Registration is called at every registration round, so an identity
	// that changes at run time (a slave promoted to id 0) and a changed
	// topic table are sent as they are then. The registrar does not modify
	// the result.
	Registration() Registration
}

// RegistrarConfig configures a Registrar. Zero fields take the defaults.
type RegistrarConfig struct {
	// NameServers are the "host:port" addresses to register with.
	NameServers []string
	// Local is a name server in this process registered with directly
	// (Server.RegisterBroker), beside NameServers; nil for none.
	Local *Server
	// Interval between registration rounds. Default
	// DefaultRegisterInterval. It must stay well below the name servers'
	// expiry (DefaultExpireAfter) and their remoting idle timeout
	// (remoting.DefaultIdleTimeout, 120 s): a name server that closes the
	// idle registration connection drops the broker until the next round.
	Interval time.Duration
	// Timeout bounds each call to one name server. Default
	// DefaultRegisterTimeout.
	Timeout time.Duration
	// Compress sends the zlib body form; it loses topicSysFlag and order,
	// so the default is the JSON form (RocketMQ's compressedRegister
	// default is false too).
	Compress bool
	// OnRegistered, if set, is called after each successful registration
	// with the name server's address ("" for Local) and its answer (a
	// slave learns its master's addresses from it). It must not block.
	OnRegistered func(nameServer string, res RegisterResult)
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Registrar keeps one broker registered with a list of name servers: at
// Start, every Interval, and on Trigger, in parallel with each, a dead
// name server being logged (rate-limited) and retried next round without
// delaying the others. Each remote name server gets one persistent
// connection (see nsClient). Its methods are safe for concurrent use.
type Registrar struct {
	cfg     RegistrarConfig
	src     RegistrarSource
	log     *slog.Logger
	targets []*target

	// roundMu serializes rounds (the loop's and Register's).
	roundMu sync.Mutex

	mu      sync.Mutex
	started bool
	stopped bool
	trigger chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// target is one name server and its failure-log state.
type target struct {
	addr   string // "" for Local
	client *nsClient

	mu       sync.Mutex
	failing  bool
	lastWarn time.Time
}

// NewRegistrar returns a registrar for src; nothing is sent before Start
// or Register.
func NewRegistrar(cfg RegistrarConfig, src RegistrarSource) *Registrar {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultRegisterInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRegisterTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Registrar{cfg: cfg, src: src, log: cfg.Logger, trigger: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.Local != nil {
		r.targets = append(r.targets, &target{})
	}
	for _, a := range cfg.NameServers {
		r.targets = append(r.targets, &target{addr: a, client: newNSClient(a)})
	}
	return r
}

// Start registers with every name server at once, then every Interval and
// after each Trigger, until Stop. A second Start, or one after Stop, does
// nothing.
func (r *Registrar) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return
	}
	r.started = true
	go r.loop()
}

// Trigger asks for a registration round now (topics or the role changed).
// It does not wait; triggers arriving while a round is pending or running
// are coalesced into one more round.
func (r *Registrar) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

func (r *Registrar) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		r.Register(context.Background())
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.trigger:
		}
	}
}

// Register runs one registration round now and waits for it: every name
// server in parallel, each call bounded by Timeout and ctx. It returns the
// failures joined (nil when every name server accepted).
// After Stop it returns ErrRegistrarStopped and sends nothing, so no
// registration follows the unregistration.
func (r *Registrar) Register(ctx context.Context) error {
	r.roundMu.Lock()
	defer r.roundMu.Unlock()
	r.mu.Lock()
	stopped := r.stopped
	r.mu.Unlock()
	if stopped {
		return ErrRegistrarStopped
	}
	reg := r.src.Registration()
	var cmdErr error
	var body *remoting.Command
	if len(r.cfg.NameServers) > 0 {
		body, cmdErr = newRegisterRequest(reg, r.cfg.Compress)
	}
	return r.each(ctx, func(ctx context.Context, t *target) error {
		if t.client == nil {
			res, err := r.cfg.Local.RegisterBroker(reg)
			if err == nil && r.cfg.OnRegistered != nil {
				r.cfg.OnRegistered("", res)
			}
			return t.note(r.log, "registering with the local name server", err)
		}
		if cmdErr != nil {
			return t.note(r.log, "registering", cmdErr)
		}
		cmd := *body // each call sets its own opaque
		resp, err := t.client.call(ctx, &cmd)
		if err == nil && resp.Code != remoting.Success {
			err = fmt.Errorf("%w REGISTER_BROKER from %s: code %d: %s", errNotSuccess, reg.BrokerAddr, resp.Code, resp.Remark)
		}
		if err == nil && r.cfg.OnRegistered != nil {
			r.cfg.OnRegistered(t.addr, RegisterResult{HAServerAddr: resp.Ext(hdrHAServerAddr), MasterAddr: resp.Ext(hdrMasterAddr)})
		}
		return t.note(r.log, "registering", err)
	})
}

// ErrRegistrarStopped is returned by Register after Stop.
var ErrRegistrarStopped = errors.New("namesrv: registrar stopped")

// each runs f for every target in parallel, each under its own Timeout.
func (r *Registrar) each(ctx context.Context, f func(context.Context, *target) error) error {
	errs := make([]error, len(r.targets))
	var wg sync.WaitGroup
	for i, t := range r.targets {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
			defer cancel()
			errs[i] = f(cctx, t)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stop ends the periodic registration, waits for a round in flight, sends
// UNREGISTER_BROKER to every name server (Local: UnregisterBroker) with
// the identity Registration gives now, and closes the connections. ctx
// bounds the whole; each call is also bounded by Timeout. It returns the
// unregistration failures joined. Stop is idempotent; later calls return
// nil at once.
func (r *Registrar) Stop(ctx context.Context) error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	started := r.started
	r.mu.Unlock()
	close(r.stop)
	if started {
		select {
		case <-r.done:
		case <-ctx.Done():
			return fmt.Errorf("stopping the registrar: %w", ctx.Err())
		}
	}
	r.roundMu.Lock()
	defer r.roundMu.Unlock()
	reg := r.src.Registration()
	ref := brokerRef{cluster: reg.Cluster, name: reg.BrokerName, addr: reg.BrokerAddr, id: reg.BrokerID}
	return r.each(ctx, func(ctx context.Context, t *target) error {
		if t.client == nil {
			r.cfg.Local.UnregisterBroker(ref.cluster, ref.name, ref.addr, ref.id)
			return nil
		}
		defer t.client.close()
		resp, err := t.client.call(ctx, newUnregisterRequest(ref))
		if err == nil && resp.Code != remoting.Success {
			err = fmt.Errorf("%w UNREGISTER_BROKER from %s: code %d: %s", errNotSuccess, ref.addr, resp.Code, resp.Remark)
		}
		if err != nil {
			err = fmt.Errorf("unregistering from name server %s: %w", t.addr, err)
			r.log.Warn("namesrv: unregistration failed", "namesrv", t.addr, "err", err)
		}
		return err
	})
}

// note logs a call's outcome: a failure at once when the target was
// healthy, then at most once per failureLogEvery; a recovery once. It
// returns err wrapped with the target's address.
func (t *target) note(log *slog.Logger, what string, err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	name := t.addr
	if name == "" {
		name = "local"
	}
	if err == nil {
		if t.failing {
			log.Info("namesrv: name server reachable again", "namesrv", name)
		}
		t.failing = false
		return nil
	}
	now := time.Now()
	if !t.failing || now.Sub(t.lastWarn) >= failureLogEvery {
		log.Warn("namesrv: registration failed; retrying next round", "namesrv", name, "err", err)
		t.lastWarn = now
	}
	t.failing = true
	return fmt.Errorf("%s (name server %s): %w", what, name, err)
}
