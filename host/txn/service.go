package txn

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// Log is what the service reads: the half and op queues and records by
// log offset. *core.Store implements it.
type Log interface {
	GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(tagsCode int64) bool) (core.GetResult, error)
	// ReadRecord returns a copy of the whole record at log offset off;
	// an error when no record starts there.
	ReadRecord(off int64) ([]byte, error)
	// MaxQueueOffset is the next queue offset of topic/queueID as
	// dispatched (0 for a queue that does not exist).
	MaxQueueOffset(topic string, queueID int32) int64
}

// Offsets is where the check service keeps its progress: the consumer
// offset table, under Group, for HalfTopic and OpTopic queue 0.
// *meta.ConsumerOffsets (core/meta, consumerOffset.json) implements it;
// it is persisted with the store's metadata and shipped to slaves, so a
// node that becomes master continues from it.
type Offsets interface {
	Query(group, topic string, queueID int32) (offset int64, ok bool)
	Commit(group, topic string, queueID int32, offset int64) error
	Persist() error
}

// Check is one CHECK_TRANSACTION_STATE request (RocketMQ's
// CheckTransactionStateRequestHeader and its body) for the half record
// whose re-appended copy is at CommitLogOffset / TranStateTableOffset.
type Check struct {
	// TranStateTableOffset and CommitLogOffset are the half queue offset
	// and log offset of the copy the producer must name in its answer.
	TranStateTableOffset int64
	CommitLogOffset      int64
	// MsgID and TransactionID are the message's UNIQ_KEY (RocketMQ sends
	// it in both).
	MsgID         string
	TransactionID string
	// OffsetMsgID is the copy's offset message id.
	OffsetMsgID string
	// Record is the copy's stored record with topic and queue set to its
	// real ones (RocketMQ's MessageDecoder.encode of the half message):
	// the check's body.
	Record []byte
}

// Config is what a Service works with. Every field but Logger, Now,
// Flush and the three limits (zero: the defaults) is required.
type Config struct {
	Log     Log
	Offsets Offsets
	// Append writes messages to the log, all or none (the node's write
	// path: refused while the node may not take writes). It must not
	// rewrite a message addressed to HalfTopic, OpTopic or CheckMaxTopic.
	Append func(msgs []*record.Message) ([]core.AppendResult, error)
	// Check sends c to a live connection of producer group group (oneway).
	// An error means none could be reached; the check is then skipped, as
	// RocketMQ skips it, and counted.
	Check func(group string, c Check) error
	// Flush, if set, makes the log durable up to what is written; the
	// check service calls it before it records progress, so that the
	// re-appended copies it moved past are on disk first.
	Flush func() error
	// Interval is the time between two check rounds
	// (transactionCheckInterval); default DefaultCheckInterval.
	Interval time.Duration
	// Timeout is transactionTimeOut: a half message born less than this
	// long ago (or its CHECK_IMMUNITY_TIME_IN_SECONDS) is not checked;
	// default DefaultTimeout.
	Timeout time.Duration
	// MaxChecks is transactionCheckMax: a half message checked this many
	// times without a decision is moved to CheckMaxTopic; default
	// DefaultMaxChecks.
	MaxChecks int
	Logger    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service holds a node's transaction state: it answers END_TRANSACTION
// (End) and checks undecided half messages with their producers. It runs
// between Start and Stop, while its node is master; a stopped service may
// be started again (after a demotion and a promotion).
type Service struct {
	cfg Config
	log *slog.Logger

	mu  sync.Mutex // guards run
	run *runState
}

type runState struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a stopped service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultCheckInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxChecks <= 0 {
		cfg.MaxChecks = DefaultMaxChecks
	}
	return &Service{cfg: cfg, log: cfg.Logger}
}

// Start starts the check loop: a round every Interval, the first one
// Interval after Start. It does nothing if the service is running.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runState{cancel: cancel, done: make(chan struct{})}
	s.run = r
	go func() {
		defer close(r.done)
		s.loop(ctx)
	}()
	s.log.Info("transaction check service started", "interval", s.cfg.Interval, "timeout", s.cfg.Timeout, "maxChecks", s.cfg.MaxChecks)
}

// Stop ends the check loop, waiting for a round under way, and persists
// the progress. End answers ErrNotMaster from then on. It does nothing if
// the service is not running.
func (s *Service) Stop() {
	s.mu.Lock()
	r := s.run
	s.run = nil
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
	if err := s.cfg.Offsets.Persist(); err != nil {
		s.log.Error("persisting transaction check progress at stop", "err", err)
	}
	s.log.Info("transaction check service stopped")
}

// Running reports whether the service runs (its node is master).
func (s *Service) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run != nil
}

func (s *Service) loop(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.CheckOnce(ctx); err != nil {
			s.log.Warn("transaction check round", "err", err)
		}
	}
}

// immunity is how long after its birth the half record rec is immune from
// checks: CHECK_IMMUNITY_TIME_IN_SECONDS when the producer set it,
// otherwise Timeout (RocketMQ's getImmunityTime).
func (s *Service) immunity(rec *record.Record) time.Duration {
	if v, ok := record.GetProperty(rec.Properties, record.PropertyCheckImmunityTime); ok {
		if n, err := parseSeconds(v); err == nil {
			return n
		}
	}
	return s.cfg.Timeout
}
