package remoting

import (
	"context"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk/storehost"
)

// TopicTable is the topic table shared by the name-server and broker roles:
// the store's own topic configurations (meta.TopicConfig, whose Perm bits
// are meta.PermRead, meta.PermWrite and meta.PermInherit), with no copy in
// between. A Perm of 0 is read as read-write.
// Implementations must be safe for concurrent use.
type TopicTable interface {
	// Topic returns the named topic's configuration and true, or false if
	// no such topic exists. It must be cheap (it is called on every send
	// and every route lookup) and must not block on I/O.
	Topic(name string) (meta.TopicConfig, bool)

	// CreateTopic creates t if no topic of that name exists and returns
	// the topic's configuration: t as stored, or the existing
	// configuration unchanged if the topic already existed (so concurrent
	// creations of one name all succeed and agree). The caller has
	// validated t.TopicName (meta.ValidateTopicName) and set queue counts
	// >= 1; a Perm of 0 is stored as read-write. The new topic is visible
	// to Topic before CreateTopic returns; persisting it may happen later.
	// An error means the topic was not created (e.g. the metadata store is
	// read-only); it is reported to the client as SYSTEM_ERROR.
	CreateTopic(t meta.TopicConfig) (meta.TopicConfig, error)
}

// ReadAccess says how far this node's own log may be trusted to answer
// reads. The broker asks Backend.ReadAccess once per pull round, offset
// query, offset search and commit, and applies the rules below itself, so
// every read path decides the same way from one answer.
//
// Why SYSTEM_BUSY: rocketmq-client-go maps every pull response code other
// than SUCCESS, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY and
// PULL_OFFSET_MOVED to an error (internal/client.go processPullResponse);
// the push consumer then re-pulls the same queue offset after 3 s
// (_PullDelayTimeWhenError) without touching its offset table or its
// process queue. PULL_OFFSET_MOVED, by contrast, drops the process queue
// and overwrites the consumer's offset (update with increaseOnly=false,
// then persist), which is how a wiped master used to send consumers back
// to 0. An error answer to QUERY_CONSUMER_OFFSET (anything but SUCCESS and
// QUERY_NOT_FOUND) makes computePullFromWhereWithException fail, so the
// rebalance skips the queue and asks again at the next rebalance, where
// QUERY_NOT_FOUND or SUCCESS 0 would start it from consumeFromWhere or 0.
// An error to GET_MAX_OFFSET or SEARCH_OFFSET_BY_TIMESTAMP likewise leaves
// the queue unassigned until the next rebalance. The Java client behaves
// the same (MQBrokerException, pull retried after
// pullTimeDelayMillsWhenException).
type ReadAccess struct {
	// Refused, when not empty, is why this node must not answer from its
	// log at all: it may lack records, queues and consumer offsets that a
	// replica holds (a master fenced by its replication plugin, e.g. after
	// losing its disk, until it has caught up from the replica and merged
	// the replica's consumer offsets). Pulls, QUERY_CONSUMER_OFFSET,
	// GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
	// QUERY_MESSAGE and VIEW_MESSAGE_BY_ID are answered SYSTEM_BUSY with
	// this text in the remark; consumer offset commits (UPDATE_CONSUMER_OFFSET
	// and a pull's piggy-backed commitOffset) are kept only where they raise
	// the stored offset.
	Refused string
	// Trailing means this node's log is a copy that may trail another
	// node's (a slave, connected or not): what it holds is right, but the
	// absence of a record, a queue or a consumer offset is no evidence
	// that none exists. A pull past the end of a queue as this node knows
	// it is answered core.NotYetVisible by GetMessages (see there), so
	// PULL_NOT_FOUND at the requested offset (caught up: the pull is held
	// and re-read as data arrives), never PULL_OFFSET_MOVED;
	// QUERY_CONSUMER_OFFSET for a group with no
	// offset here is answered SYSTEM_BUSY (its offsets arrive with the
	// master's metadata); commits are kept only where they raise the
	// stored offset (the master's metadata merges into a slave by maximum,
	// so a lower value could not stay anyway).
	Trailing bool
}

// keepsOffsetsUp reports whether commits may only raise stored offsets.
func (a ReadAccess) keepsOffsetsUp() bool { return a.Refused != "" || a.Trailing }

// AckStatus is the outcome of waiting for a profile's acknowledgement
// policy: the host's storehost.AckStatus, the one rule's answer, named here
// for the Backend contract (no second enum to map).
type AckStatus = storehost.AckStatus

// The statuses; the broker answers them with the response codes named in
// storehost (FLUSH_DISK_TIMEOUT 10, SLAVE_NOT_AVAILABLE 11,
// FLUSH_SLAVE_TIMEOUT 12).
const (
	AckOK                = storehost.AckOK
	AckFlushDiskTimeout  = storehost.AckFlushDiskTimeout
	AckFlushSlaveTimeout = storehost.AckFlushSlaveTimeout
	AckSlaveNotAvailable = storehost.AckSlaveNotAvailable
)

// QueryResult is what Backend.QueryMessages found.
type QueryResult struct {
	// Records are whole stored records, each byte for byte as in the
	// commitlog.
	Records [][]byte
	// IndexLastUpdateTimestamp and IndexLastUpdatePhyOffset describe how
	// current the index is (RocketMQ's QueryMessageResponseHeader); 0 when
	// unknown.
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyOffset int64
}

// Backend is the message store as the broker role sees it. The host
// implements it on top of core.Store, its metadata tables and the loaded
// plugins.
//
// Concurrency: every method may be called from many goroutines at once.
// Methods without a ctx must not block for long (they run on a
// connection's read goroutine); methods with a ctx must return promptly
// once ctx is done.
//
// Offsets: "queue offset" is a message's index in its consume queue (one
// per topic and queue id); "physical offset" is a record's byte offset in
// the commitlog.
type Backend interface {
	TopicTable
	AdminBackend

	// MaxMessageSize is the largest message body, in bytes, Append
	// accepts. The broker rejects larger bodies with MESSAGE_ILLEGAL before
	// calling Append.
	MaxMessageSize() int

	// Append stores msgs, which all have the same Topic and QueueID and
	// have been validated by the broker (topic name, body size,
	// properties), contiguously and with consecutive queue offsets, in
	// order: either all are stored or none. The broker fills in every
	// field of each message except the ones the store assigns (queue and
	// physical offsets, store timestamp). Append returns once the records
	// are written and readable by replication (committed), not
	// necessarily durable or visible to consumers; AckNow and AckAsync
	// wait for the rest. The result has one entry per message, in order.
	//
	// Calls from one connection are made in request order, from its read
	// goroutine, so pipelined sends to one queue keep their order; Append
	// should therefore not wait for anything slower than the write itself.
	//
	// Errors: core's sentinels as the store returns them, or errors
	// wrapping ErrServiceUnavailable or ErrMessageIllegal; the broker picks
	// the response code with errorCodes (anything it does not recognise
	// is SYSTEM_ERROR). On error nothing was stored.
	Append(ctx context.Context, msgs []*record.Message) ([]core.AppendResult, error)

	// AckNow reports, without blocking, the acknowledgement of the
	// records ending at physical offset end (exclusive) when it is known
	// at once (the policy waits for nothing, or what it waits for has
	// already happened, or it fails at once): that status and true;
	// otherwise false, and the caller uses AckAsync. The broker answers a
	// send on the connection's read goroutine when it can, which lets
	// pipelined answers share a write.
	AckNow(end int64) (AckStatus, bool)

	// AckAsync arranges for done to be called exactly once, when the
	// records ending at physical offset end (exclusive) satisfy the
	// profile's acknowledgement policy (durable on this machine, received
	// by the required replicas, both, or nothing) or the policy's own
	// timeout expires: with AckOK, or the status naming the guarantee
	// that was not confirmed; the records stay stored in every case. done
	// may run at once on the caller's goroutine, otherwise on whatever
	// goroutine confirms or times out the wait, so it must be quick and
	// must not block. No goroutine waits meanwhile.
	AckAsync(end int64, done func(AckStatus))

	// GetMessages reads up to maxCount records (and, beyond the first,
	// at most maxBytes bytes) of topic/queueID starting at queue offset
	// offset, skipping entries whose consume-queue tags code filter
	// rejects (filter nil accepts all). Statuses are core.GetStatus's;
	// positions outside the queue are reported through the status, not as
	// errors. Only records visible to consumers (at or below the confirm
	// offset) are returned. A status that would move the consumer
	// backwards (a missing or empty queue whose end is below offset, or
	// core.OffsetOverflowBadly) is only returned when the queue is known
	// complete up to the visible end of the log; otherwise, and always on
	// a node whose log trails another's (ReadAccess.Trailing), the status
	// is core.NotYetVisible with NextOffset = offset. GetMessages blocks
	// (until ctx is done at the latest) only to decide such an answer: a
	// read at an offset below the queue's max (QueueOffsets) returns
	// without waiting, and the broker makes such reads on the
	// connection's read goroutine. Data is the stored
	// records back to back, byte for byte (the wire format of a pull
	// body), Sizes their lengths; the broker copies Data into the
	// response frame and does not retain it. An error means the read
	// itself failed (I/O, corruption: wrapping ErrCorrupt) and becomes
	// SYSTEM_ERROR; the Backend reports it to operators (log, metric),
	// since the consumer retries the same read every few seconds and the
	// broker logs it at debug level only.
	GetMessages(ctx context.Context, topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(tagsCode int64) bool) (core.GetResult, error)

	// WaitForData registers a wait for the queue topic/queueID to hold a
	// consumer-visible message at or after queue offset offset. The
	// returned channel is closed promptly (within milliseconds) after
	// such a message becomes visible, at once if one already is, and when
	// the backend closes; a dispatch to another queue does not close it,
	// but spurious closes are allowed: the broker re-reads after every
	// wake-up. The broker calls stop exactly once when it stops waiting,
	// woken or not (its own timeout, ctx done); stop releases what the
	// wait holds and may be called after the channel was closed. It must
	// not block.
	WaitForData(topic string, queueID int32, offset int64) (wake <-chan struct{}, stop func())

	// QueueOffsets returns the queue's min offset (oldest message still
	// readable) and max offset (the next to be written, as visible to
	// consumers); both 0 for a queue that does not exist.
	QueueOffsets(topic string, queueID int32) (min, max int64)

	// OffsetByTime returns the queue offset of the first message stored
	// at or after ts (Unix milliseconds), or the queue's max offset when
	// none is; 0 for a missing queue.
	OffsetByTime(ctx context.Context, topic string, queueID int32, ts int64) (int64, error)

	// ReadMessage returns a copy of the whole stored record at physical
	// offset physOffset, byte for byte, after checking it whole (lengths
	// and body CRC). Errors wrap ErrNotFound when no record starts there
	// (or it was deleted by retention), ErrCorrupt when the record there
	// is damaged.
	ReadMessage(ctx context.Context, physOffset int64) ([]byte, error)

	// QueryMessages returns up to maxNum records of topic whose KEYS or
	// UNIQ_KEY include key and whose store time is within [begin, end]
	// (Unix milliseconds). An error wrapping ErrNotSupported means no key
	// index is loaded. No match is an empty result, not an error.
	QueryMessages(ctx context.Context, topic, key string, maxNum int, begin, end int64) (QueryResult, error)

	// ConsumerOffset returns the committed offset of group on
	// topic/queueID, and false if the group never committed one there.
	ConsumerOffset(group, topic string, queueID int32) (int64, bool)

	// CommitConsumerOffset records that group's next offset to consume on
	// topic/queueID is offset (>= 0; the broker drops negative values).
	// Moving an offset backwards is allowed (a consumer resetting). The
	// value must be visible to ConsumerOffset at once; persisting it may
	// be deferred.
	CommitConsumerOffset(group, topic string, queueID int32, offset int64) error

	// RaiseConsumerOffset is CommitConsumerOffset that never lowers: the
	// stored offset becomes max(stored, offset), atomically with respect
	// to concurrent commits (no interleaving of two raises can leave the
	// lower one). The broker uses it instead of CommitConsumerOffset
	// while ReadAccess says the node's offsets may be incomplete.
	RaiseConsumerOffset(group, topic string, queueID int32, offset int64) error

	// ReadAccess says whether this node may answer reads from its log now
	// (see ReadAccess). It must be cheap (atomic loads): the broker calls
	// it on every pull round and offset request.
	ReadAccess() ReadAccess

	// MaxReconsumeTimes returns how many times a message of group is
	// redelivered through %RETRY%<group> before it goes to %DLQ%<group>:
	// the group's configured retryMaxTimes, 16 when unset.
	MaxReconsumeTimes(group string) int
}

// AdminBackend is the part of Backend the admin request codes use: the
// metadata tables exactly as core/meta keeps them (no mirrored types), read
// as snapshots and changed through core/meta's own validators. A change is
// persisted before the method returns, so a node that acknowledged it keeps
// it across a crash, the metadata sync ships it to slaves, and name servers
// see it at the next route lookup.
//
// Errors of the changing methods: an error wrapping meta.ErrInvalid means
// the configuration breaks a table rule and nothing changed (the broker
// answers INVALID_PARAMETER); an error wrapping ErrServiceUnavailable means
// this node takes no metadata changes now (a slave, whose tables are copies
// of its master's) and nothing changed; any other error is a persist
// failure: the change is kept in memory and retried by the next persist.
type AdminBackend interface {
	// TopicSnapshot returns a copy of the topic table and its version.
	TopicSnapshot() meta.TopicsSnapshot

	// PutTopic creates the topic t.TopicName or replaces its
	// configuration with t (an empty TopicFilterType is stored as
	// meta.FilterSingleTag). The broker has validated the name and the
	// reserved prefixes; the store validates the rest (meta.TopicConfig's
	// Validate). Stored messages are kept; queues beyond a lowered
	// WriteQueueNums simply receive nothing new.
	PutTopic(t meta.TopicConfig) error

	// DeleteTopic removes the topic called name and every group's
	// consumer offsets for it, and reports whether the topic existed. Its
	// stored messages stay in the log until retention removes them.
	DeleteTopic(name string) (existed bool, err error)

	// SubscriptionGroupSnapshot returns a copy of the subscription group
	// table and its version.
	SubscriptionGroupSnapshot() meta.SubscriptionGroupsSnapshot

	// PutSubscriptionGroup creates the group c.GroupName or replaces its
	// configuration with c, validated by meta.SubscriptionGroupConfig's
	// Validate.
	PutSubscriptionGroup(c meta.SubscriptionGroupConfig) error

	// DeleteSubscriptionGroup removes the group called name and reports
	// whether it existed; with cleanOffsets it also removes the group's
	// consumer offsets on every topic (whether or not the group existed).
	DeleteSubscriptionGroup(name string, cleanOffsets bool) (existed bool, err error)

	// ConsumerOffsetSnapshot returns a deep copy of the consumer offset
	// table and its version.
	ConsumerOffsetSnapshot() meta.OffsetsSnapshot

	// RuntimeInfo returns GET_BROKER_RUNTIME_INFO's key/value table:
	// only keys of RocketMQ's table whose value this node knows truly
	// (brokerVersionDesc, bootTimestamp, commitLogMinOffset,
	// commitLogMaxOffset, commitLogDiskRatio, dispatchBehindBytes, ...),
	// each value formatted as RocketMQ formats it. It must not block.
	RuntimeInfo() map[string]string
}
