package remoting

import (
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Broker defaults.
const (
	// DefaultMaxPullCount caps the messages of one pull response.
	DefaultMaxPullCount = 32
	// DefaultMaxPullBytes caps a pull response's body beyond its first
	// record.
	DefaultMaxPullBytes = 4 << 20
	// DefaultMaxSuspend caps how long a pull is held. Clients time a pull
	// out after 30 s (rocketmq-client-go) and ask for 15-20 s.
	DefaultMaxSuspend = 25 * time.Second
	// DefaultClientExpiry drops a consumer that has not sent a heartbeat
	// for this long (RocketMQ's channelExpiredTimeout).
	DefaultClientExpiry = 120 * time.Second
	// DefaultSweepInterval is how often expired consumers are looked for.
	DefaultSweepInterval = 10 * time.Second
	// DefaultMaxReconsumeTimes is RocketMQ's default retryMaxTimes.
	DefaultMaxReconsumeTimes = 16
)

// BrokerConfig configures the broker role. Zero fields take the defaults.
type BrokerConfig struct {
	// AutoCreateTopics creates an unknown, validly named topic with
	// DefaultQueueNums queues on its first send. When false such a send
	// gets TOPIC_NOT_EXIST. Retry and dead-letter topics are always
	// created as needed.
	AutoCreateTopics bool
	// DefaultQueueNums is the queue count of auto-created topics; default 4.
	DefaultQueueNums int32
	// Transactions decides transactional messages (END_TRANSACTION).
	// Nil refuses them: a prepared send gets NO_PERMISSION and
	// END_TRANSACTION REQUEST_CODE_NOT_SUPPORTED.
	Transactions Transactions
	// DisablePropertyFilter turns SQL92 subscriptions off (RocketMQ's
	// enablePropertyFilter=false): their pulls and CHECK_CLIENT_CONFIG get
	// SYSTEM_ERROR saying so. The zero value evaluates them.
	DisablePropertyFilter bool
	// StoreHost is written into every record's STOREHOST field and so into
	// offset message ids. The zero value uses the local address of the
	// connection the message arrived on.
	StoreHost netip.AddrPort
	// MaxPullCount caps the messages per pull; default DefaultMaxPullCount.
	MaxPullCount int
	// MaxPullBytes caps a pull body beyond its first record; default
	// DefaultMaxPullBytes.
	MaxPullBytes int
	// MaxSuspend caps how long a pull that found nothing is held;
	// default DefaultMaxSuspend.
	MaxSuspend time.Duration
	// ClientExpiry drops consumers silent for this long; default
	// DefaultClientExpiry.
	ClientExpiry time.Duration
	// SweepInterval is the expiry check period; default
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Now is the clock for heartbeat expiry; default time.Now.
	Now func() time.Time
}

// DefaultQueueNums is the queue count of a topic created on first use
// (RocketMQ's defaultTopicQueueNums).
const DefaultQueueNums = 4

func (c BrokerConfig) withDefaults() BrokerConfig {
	if c.DefaultQueueNums <= 0 {
		c.DefaultQueueNums = DefaultQueueNums
	}
	if c.MaxPullCount <= 0 {
		c.MaxPullCount = DefaultMaxPullCount
	}
	if c.MaxPullBytes <= 0 {
		c.MaxPullBytes = DefaultMaxPullBytes
	}
	if c.MaxSuspend <= 0 {
		c.MaxSuspend = DefaultMaxSuspend
	}
	if c.ClientExpiry <= 0 {
		c.ClientExpiry = DefaultClientExpiry
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Broker is the broker role: sends, pulls (long polling), consumer offsets,
// consumer groups and redelivery, over a Backend. Register it on a Server
// with Register; stop its background work with Close.
type Broker struct {
	cfg   BrokerConfig
	be    Backend
	log   *slog.Logger
	reg   *registry
	locks lockTable
	// producers is the producer group table (HEART_BEAT producerDataSet).
	producers *producerTable

	rr   atomic.Uint32
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// NewBroker returns a broker role over be and starts its consumer-expiry
// sweeper.
func NewBroker(cfg BrokerConfig, be Backend) *Broker {
	cfg = cfg.withDefaults()
	b := &Broker{cfg: cfg, be: be, log: cfg.Logger, reg: newRegistry(), producers: newProducerTable(), stop: make(chan struct{})}
	b.wg.Add(1)
	go b.sweepLoop()
	return b
}

// Close stops the sweeper and waits for pending notifications. It does not
// close the Backend or any Server. Idempotent.
func (b *Broker) Close() {
	b.once.Do(func() { close(b.stop) })
	b.wg.Wait()
}

// Register installs the broker handlers on s (before s.Serve), including
// the connection-close hook that drops the connection's consumers.
func (b *Broker) Register(s *Server) {
	s.Handle(CodeSendMessage, func(r *Request) *Command { return b.handleSend(r, false, false) })
	s.Handle(CodeSendMessageV2, func(r *Request) *Command { return b.handleSend(r, true, false) })
	s.Handle(CodeSendBatchMessage, func(r *Request) *Command { return b.handleSend(r, true, true) })
	s.Handle(CodePullMessage, b.handlePull)
	s.Handle(CodeQueryMessage, b.handleQueryMessage)
	s.Handle(CodeViewMessageByID, b.handleViewMessage)
	s.Handle(CodeQueryConsumerOffset, b.handleQueryConsumerOffset)
	s.Handle(CodeUpdateConsumerOffset, b.handleUpdateConsumerOffset)
	s.Handle(CodeGetMaxOffset, b.handleGetMaxOffset)
	s.Handle(CodeGetMinOffset, b.handleGetMinOffset)
	s.Handle(CodeSearchOffsetByTimestamp, b.handleSearchOffset)
	s.Handle(CodeHeartBeat, b.handleHeartbeatWithProducers)
	s.Handle(CodeEndTransaction, b.handleEndTransaction)
	s.Handle(CodeUnregisterClient, b.handleUnregister)
	s.Handle(CodeGetConsumerListByGroup, b.handleConsumerList)
	s.Handle(CodeConsumerSendMsgBack, b.handleSendBack)
	s.Handle(CodeLockBatchMQ, b.handleLockBatch)
	s.Handle(CodeUnlockBatchMQ, b.handleUnlockBatch)
	s.Handle(CodeCheckClientConfig, b.handleCheckClientConfig)
	b.registerAdmin(s)
	s.OnConnClose(func(c *Conn) { b.notify(b.reg.removeConn(c)) })
	s.OnConnClose(b.producers.removeConn)
}

// ConsumerIDs returns the client ids registered in group, sorted.
func (b *Broker) ConsumerIDs(group string) []string { return b.reg.clientIDs(group) }
