package namesrv

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/keelmq/keel/core/meta"
)

// Server defaults (RocketMQ's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME and
// scanNotActiveBroker period).
const (
	DefaultExpireAfter  = 120 * time.Second
	DefaultScanInterval = 5 * time.Second
)

// TopicCreator lets a name server create a topic on a route-lookup miss,
// for the all-in-one node whose broker auto-creates topics.
type TopicCreator interface {
	// EnsureTopic is called when a GET_ROUTEINFO_BY_TOPIC finds no group
	// holding topic name, once per such lookup, without any lock of the
	// server held, possibly concurrently (also for the same name). It
	// creates the topic if the broker's rules allow it and, before it
	// returns, registers the broker's new topic table with this server
	// (Server.RegisterBroker), so that the lookup that follows finds it.
	// ok reports whether the topic exists now; err reports a failure to
	// create it (the lookup answers SYSTEM_ERROR). A false ok with a nil
	// err is a plain "no such topic".
	EnsureTopic(name string) (ok bool, err error)
}

// Config configures a Server. Zero fields take the defaults.
type Config struct {
	// ExpireAfter drops a broker this long after its last registration,
	// unless it sent its own heartbeatTimeoutMillis. Default
	// DefaultExpireAfter.
	ExpireAfter time.Duration
	// ScanInterval is the period of the expiry scan Start runs. Default
	// DefaultScanInterval.
	ScanInterval time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Creator, when set, is asked to create a topic a route lookup misses
	// (see TopicCreator). Without it a miss is TOPIC_NOT_EXIST, as in
	// RocketMQ.
	Creator TopicCreator
}

// Server is a stateless RocketMQ name server: the registry of every broker
// registered with it, and the answers clients and brokers ask of it. Its
// methods are safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger

	mu  sync.Mutex
	reg *registry

	runMu sync.Mutex
	stop  chan struct{}
	done  chan struct{}
}

// New returns a server with an empty registry. Call Start to run the
// expiry scan and Register to serve it on a remoting.Server.
func New(cfg Config) *Server {
	if cfg.ExpireAfter <= 0 {
		cfg.ExpireAfter = DefaultExpireAfter
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = DefaultScanInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg, log: cfg.Logger, reg: newRegistry()}
}

// RegisterBroker registers reg in process, as a REGISTER_BROKER over the
// wire would, except that no connection's close drops it: it expires like
// any other registration unless renewed (Registrar with
// RegistrarConfig.Local renews it). Errors wrap ErrInvalid.
func (s *Server) RegisterBroker(reg Registration) (RegisterResult, error) {
	return s.register(reg, 0)
}

func (s *Server) register(reg Registration, conn uint64) (RegisterResult, error) {
	if err := reg.validate(); err != nil {
		return RegisterResult{}, err
	}
	s.mu.Lock()
	_, known := s.reg.brokers[brokerKey{reg.Cluster, reg.BrokerAddr}]
	res, displaced, err := s.reg.register(reg, s.cfg.Now(), s.cfg.ExpireAfter, conn)
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("namesrv: registration refused", "cluster", reg.Cluster, "broker", reg.BrokerName, "addr", reg.BrokerAddr, "id", reg.BrokerID, "err", err)
		return RegisterResult{}, err
	}
	for _, d := range displaced {
		s.log.Warn("namesrv: broker id taken over by another address; the old one is forgotten", "cluster", d.cluster, "broker", reg.BrokerName, "id", reg.BrokerID, "old", d.addr, "new", reg.BrokerAddr)
	}
	if !known {
		s.log.Info("namesrv: broker registered", "cluster", reg.Cluster, "broker", reg.BrokerName, "addr", reg.BrokerAddr, "id", reg.BrokerID, "topics", len(reg.Topics))
	}
	return res, nil
}

// UnregisterBroker forgets the broker at brokerAddr in cluster if it is
// registered as brokerName's member brokerID (UNREGISTER_BROKER); it does
// nothing otherwise.
func (s *Server) UnregisterBroker(cluster, brokerName, brokerAddr string, brokerID int64) {
	s.mu.Lock()
	ok := s.reg.unregister(cluster, brokerName, brokerAddr, brokerID)
	s.mu.Unlock()
	if ok {
		s.log.Info("namesrv: broker unregistered", "cluster", cluster, "broker", brokerName, "addr", brokerAddr, "id", brokerID)
	}
}

// Start runs the expiry scan every ScanInterval until Close. It does
// nothing if already running.
func (s *Server) Start() {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.stop != nil {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.scanLoop(s.stop, s.done)
}

// Close stops the expiry scan and waits for it. The registry stays as it
// is. Close is idempotent and returns nil.
func (s *Server) Close() error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.stop == nil {
		return nil
	}
	close(s.stop)
	<-s.done
	s.stop, s.done = nil, nil
	return nil
}

func (s *Server) scanLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.cfg.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.scan()
		}
	}
}

// scan drops every broker silent for longer than its timeout.
func (s *Server) scan() {
	now := s.cfg.Now()
	s.mu.Lock()
	gone := s.reg.removeWhere(func(lb *liveBroker) bool { return now.Sub(lb.updated) > lb.timeout })
	s.mu.Unlock()
	for _, lb := range gone {
		s.log.Warn("namesrv: broker expired", "cluster", lb.key.cluster, "broker", lb.name, "addr", lb.key.addr, "id", lb.id, "silent", now.Sub(lb.updated), "timeout", lb.timeout)
	}
}

// dropConn forgets every broker whose last registration came on conn.
func (s *Server) dropConn(conn uint64) {
	s.mu.Lock()
	gone := s.reg.removeWhere(func(lb *liveBroker) bool { return lb.conn == conn })
	s.mu.Unlock()
	for _, lb := range gone {
		s.log.Info("namesrv: broker's connection closed; broker dropped", "cluster", lb.key.cluster, "broker", lb.name, "addr", lb.key.addr, "id", lb.id)
	}
}

// errNoRoute is a route lookup's miss.
var errNoRoute = errors.New("no route")

// lookupRoute returns topic's route body. On a miss it asks the Creator
// once, for a valid topic name only, and looks again. It returns
// errNoRoute when there is none, or the Creator's error.
func (s *Server) lookupRoute(topic string) ([]byte, error) {
	if b, ok := s.routeBody(topic); ok {
		return b, nil
	}
	if s.cfg.Creator == nil || meta.ValidateTopicName(topic) != nil {
		return nil, errNoRoute
	}
	ok, err := s.cfg.Creator.EnsureTopic(topic)
	if err != nil {
		return nil, fmt.Errorf("creating topic %q on a route lookup: %w", topic, err)
	}
	if b, found := s.routeBody(topic); ok && found {
		return b, nil
	}
	return nil, errNoRoute
}

func (s *Server) routeBody(topic string) ([]byte, bool) {
	s.mu.Lock()
	rd, ok := s.reg.route(topic)
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	return mustJSON(rd), true
}
