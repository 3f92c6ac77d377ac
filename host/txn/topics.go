package txn

import "time"

// RocketMQ's transaction system topics and group (TopicValidator,
// TransactionalMessageUtil). Clients may not send to the topics.
const (
	// HalfTopic holds half messages, in queue 0, until they are decided.
	HalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	// OpTopic holds the op records: one per decided half message, queue 0.
	OpTopic = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	// CheckMaxTopic receives the half messages checked MaxChecks times
	// without a decision (RocketMQ 4.5.2 and later).
	CheckMaxTopic = "TRANS_CHECK_MAX_TIME_TOPIC"
	// Group is the internal group under which the check service keeps its
	// progress in the consumer offset table.
	Group = "CID_SYS_RMQ_TRANS"
	// OpTag is the TAGS of an op record ("d", removed).
	OpTag = "d"
)

// queueID is the one queue of HalfTopic, OpTopic and CheckMaxTopic.
const queueID int32 = 0

// Defaults (RocketMQ BrokerConfig).
const (
	// DefaultTimeout is transactionTimeOut: a half message younger than
	// this (by born time) is not checked.
	DefaultTimeout = 6 * time.Second
	// DefaultCheckInterval is transactionCheckInterval (30 s since
	// RocketMQ 5.1.1; 60 s before).
	DefaultCheckInterval = 30 * time.Second
	// DefaultMaxChecks is transactionCheckMax.
	DefaultMaxChecks = 15
)
