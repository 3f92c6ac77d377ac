package remoting

import (
	"context"
	"errors"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk/storehost"
)

// Topic permission bits (RocketMQ PermName), used in TopicInfo.Perm and in
// route data.
const (
	// PermInherit marks a topic whose config new topics copy (RocketMQ's
	// TBW102 has it).
	PermInherit int32 = 1
	// PermWrite allows producers to send to the topic.
	PermWrite int32 = 2
	// PermRead allows consumers to pull from the topic.
	PermRead int32 = 4
	// PermReadWrite is PermRead|PermWrite, the permission of ordinary topics.
	PermReadWrite = PermRead | PermWrite
)

// TopicInfo is one topic's configuration as the remoting roles need it.
type TopicInfo struct {
	// Name is the topic name, 1..127 bytes of [A-Za-z0-9_%|-].
	Name string
	// ReadQueues and WriteQueues are the queue counts advertised to
	// consumers and producers; both are >= 1.
	ReadQueues, WriteQueues int32
	// Perm is an OR of PermRead, PermWrite and PermInherit.
	Perm int32
	// SysFlag is RocketMQ's topicSysFlag (0 for ordinary topics).
	SysFlag int32
}

// TopicTable is the topic table shared by the name-server and broker roles.
// Implementations must be safe for concurrent use.
type TopicTable interface {
	// Topic returns the named topic's configuration and true, or false if
	// no such topic exists. It must be cheap (it is called on every send
	// and every route lookup) and must not block on I/O.
	Topic(name string) (TopicInfo, bool)

	// CreateTopic creates t if no topic of that name exists and returns
	// the topic's configuration: t as stored, or the existing
	// configuration unchanged if the topic already existed (so concurrent
	// creations of one name all succeed and agree). The caller has
	// validated t.Name and set queue counts >= 1. The new topic is visible
	// to Topic before CreateTopic returns; persisting it may happen later.
	// An error means the topic was not created (e.g. the metadata store is
	// read-only); it is reported to the client as SYSTEM_ERROR.
	CreateTopic(t TopicInfo) (TopicInfo, error)
}

// Errors a Backend returns to select the broker's response code. A Backend
// wraps them with the specifics (fmt.Errorf("...: %w", ErrX)); the broker
// tests with errors.Is and sends err.Error() as the response remark.
var (
	// ErrServiceUnavailable means the store cannot take writes now for a
	// reason unrelated to the message: disk full, read-only after an I/O
	// error, closed, or this broker is a slave. It becomes
	// SERVICE_NOT_AVAILABLE (14), which producers retry on another broker.
	// Nothing was stored.
	ErrServiceUnavailable = errors.New("service not available")
	// ErrMessageIllegal means the message itself was rejected (too large,
	// bad topic, properties too long). It becomes MESSAGE_ILLEGAL (13).
	// Errors wrapping record.ErrInvalid, record.ErrTooLarge or
	// record.ErrPropertiesTooLong are treated the same. Nothing was stored.
	ErrMessageIllegal = errors.New("message illegal")
	// ErrNotFound means ReadMessage found no message at the offset (never
	// written, not a record boundary, or removed by retention).
	ErrNotFound = errors.New("message not found")
	// ErrNotSupported means the Backend lacks the capability (e.g.
	// QueryMessages with no key index loaded). It becomes
	// REQUEST_CODE_NOT_SUPPORTED (3).
	ErrNotSupported = errors.New("not supported")
	// ErrCorrupt means the stored bytes of a record are damaged (bad CRC,
	// impossible lengths, a TOTALSIZE that disagrees with the consume
	// queue). The record is never served as if it were whole: the answer
	// is SYSTEM_ERROR with a remark naming the offset and the damage.
	ErrCorrupt = errors.New("stored record is damaged")
)

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
	// it (PullResult.BeyondEnd) is answered PULL_NOT_FOUND at the requested
	// offset (caught up: the pull is held and re-read as data arrives),
	// never PULL_OFFSET_MOVED; QUERY_CONSUMER_OFFSET for a group with no
	// offset here is answered SYSTEM_BUSY (its offsets arrive with the
	// master's metadata); commits are kept only where they raise the
	// stored offset (the master's metadata merges into a slave by maximum,
	// so a lower value could not stay anyway).
	Trailing bool
}

// keepsOffsetsUp reports whether commits may only raise stored offsets.
func (a ReadAccess) keepsOffsetsUp() bool { return a.Refused != "" || a.Trailing }

// Appended is where one message of an Append was stored.
type Appended struct {
	// PhysOffset is the record's commitlog (physical) offset.
	PhysOffset int64
	// QueueOffset is the record's offset in its consume queue.
	QueueOffset int64
	// Size is the record's length in bytes; PhysOffset+Size is its end.
	Size int32
}

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

// PullStatus is the outcome of Backend.GetMessages, mirroring RocketMQ's
// GetMessageStatus. The broker turns it into a response code with the table
// of the store reference §9.6.
type PullStatus int

const (
	// PullFound means at least one record is returned.
	PullFound PullStatus = iota
	// PullNoMessageInQueue means the queue exists but holds no message
	// (max == min); NextOffset is max (0 for a queue never written).
	PullNoMessageInQueue
	// PullNoMatchedLogicQueue means there is no such queue yet;
	// NextOffset is 0.
	PullNoMatchedLogicQueue
	// PullOffsetTooSmall means offset < min; NextOffset is min.
	PullOffsetTooSmall
	// PullOffsetOverflowOne means offset == max: the consumer is caught
	// up; NextOffset is offset.
	PullOffsetOverflowOne
	// PullOffsetOverflowBadly means offset > max; NextOffset is max
	// (never 0 unless the queue is empty).
	PullOffsetOverflowBadly
	// PullOffsetFoundNull means the consume-queue slice at offset is
	// missing; NextOffset is where the next readable slice starts.
	PullOffsetFoundNull
	// PullNoMatchedMessage means entries were scanned but none passed the
	// filter; NextOffset is past the scanned entries.
	PullNoMatchedMessage
	// PullMessageWasRemoving means the entries point at commitlog data
	// retention has deleted; NextOffset is past them.
	PullMessageWasRemoving
	// PullNotYetVisible means offset may lie inside the queue although
	// this node's consume queue does not reach it yet (the dispatcher is
	// behind the visible end of the log, or the log trails a replica's):
	// NextOffset is offset. The broker answers PULL_NOT_FOUND at offset,
	// a caught-up consumer that waits, never PULL_OFFSET_MOVED.
	PullNotYetVisible
)

// String returns RocketMQ's name for s.
func (s PullStatus) String() string {
	names := [...]string{"FOUND", "NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE", "OFFSET_TOO_SMALL",
		"OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING",
		"NOT_YET_VISIBLE"}
	if int(s) >= 0 && int(s) < len(names) {
		return names[s]
	}
	return "PullStatus(?)"
}

// PullResult is what Backend.GetMessages found.
type PullResult struct {
	Status PullStatus
	// NextOffset is the queue offset the consumer should pull from next.
	NextOffset int64
	// MinOffset and MaxOffset bound the queue at the time of the read
	// (max is the next offset to be written); both 0 for a missing queue.
	MinOffset, MaxOffset int64
	// Data is the stored records back to back, byte for byte as in the
	// commitlog (RocketMQ v1 records, the wire format of a pull body).
	// Non-empty exactly when Status is PullFound. The broker sends it
	// without copying and does not retain it after the reply is written.
	Data []byte
	// Count is the number of records in Data.
	Count int
}

// BeyondEnd reports whether r, the answer to a pull at offset, says that
// offset lies past the end of the queue as this node knows it: the queue
// is missing or empty with an end below offset (NO_MATCHED_LOGIC_QUEUE,
// NO_MESSAGE_IN_QUEUE) or offset > max (OFFSET_OVERFLOW_BADLY). Such an
// answer would move the consumer backwards; it is only right when this
// node's queue is complete, which a node whose dispatcher is behind, or
// whose log trails a replica's, cannot know.
func (r PullResult) BeyondEnd(offset int64) bool {
	switch r.Status {
	case PullOffsetOverflowBadly:
		return true
	case PullNoMatchedLogicQueue, PullNoMessageInQueue:
		return offset > r.NextOffset
	}
	return false
}

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
	// necessarily durable or visible to consumers; AwaitAck waits for the
	// rest. The result has one entry per message, in order.
	//
	// Calls from one connection are made in request order, from its read
	// goroutine, so pipelined sends to one queue keep their order; Append
	// should therefore not wait for anything slower than the write itself.
	//
	// Errors: wrapping ErrServiceUnavailable (disk full, read-only,
	// closed, slave) or ErrMessageIllegal (or the record package's
	// ErrInvalid / ErrTooLarge / ErrPropertiesTooLong); anything else is
	// reported as SYSTEM_ERROR. On error nothing was stored.
	Append(ctx context.Context, msgs []*record.Message) ([]Appended, error)

	// AwaitAck blocks until the records ending at physical offset end
	// (exclusive) satisfy the profile's acknowledgement policy (durable on
	// this machine, received by the required replicas, both, or nothing),
	// or until the policy's own timeout expires, or ctx is done. It
	// returns AckOK, or the status naming the guarantee that was not
	// confirmed; the records stay stored in every case. When ctx is done
	// the result is not used (the client is gone).
	AwaitAck(ctx context.Context, end int64) AckStatus

	// AckNow is AwaitAck without blocking: when the status of the records
	// ending at end is known at once (the policy waits for nothing, or
	// what it waits for has already happened, or it fails at once) it
	// returns that status and true; otherwise false, and the caller uses
	// AwaitAck. The broker answers a send on the connection's read
	// goroutine when it can, which lets pipelined answers share a write.
	AckNow(end int64) (AckStatus, bool)

	// AckAsync is AwaitAck without a waiting goroutine: it arranges for
	// done to be called exactly once with the status AwaitAck would
	// return (without a ctx: the policy's own timeouts apply), possibly
	// at once on the caller's goroutine, otherwise on whatever goroutine
	// confirms or times out the wait, so done must be quick and must not
	// block. It returns false, without calling done, when the backend
	// cannot; the caller then uses AwaitAck.
	AckAsync(end int64, done func(AckStatus)) bool

	// GetMessages reads up to maxCount records (and, beyond the first,
	// at most maxBytes bytes) of topic/queueID starting at queue offset
	// offset, skipping entries whose consume-queue tags code filter
	// rejects (filter nil accepts all). Statuses are documented at
	// PullStatus; positions outside the queue are reported through the
	// status, not as errors. Only records visible to consumers (at or
	// below the confirm offset) are returned. A status that would move
	// the consumer backwards (PullResult.BeyondEnd) is only returned when
	// the queue is known complete up to the visible end of the log;
	// otherwise the status is PullNotYetVisible. An error means the read
	// itself failed (I/O, corruption: wrapping ErrCorrupt) and becomes
	// SYSTEM_ERROR; the Backend reports it to operators (log, metric),
	// since the consumer retries the same read every few seconds and the
	// broker logs it at debug level only.
	GetMessages(ctx context.Context, topic string, queueID int32, offset int64, maxCount, maxBytes int, filter func(tagsCode int64) bool) (PullResult, error)

	// WaitForData returns a channel that is closed once the queue
	// topic/queueID may hold a consumer-visible message at or after queue
	// offset offset — promptly (within milliseconds) after such a message
	// becomes visible, and at once if one already is. Spurious closes are
	// allowed: the broker re-reads after every wake-up. The channel may
	// never be closed; the broker stops waiting when its own timeout
	// fires or ctx is done, and the implementation must then release
	// whatever it holds for this call (for example, by returning a
	// shared per-queue broadcast channel that is replaced on every
	// append, which needs no cleanup). It must not block.
	WaitForData(ctx context.Context, topic string, queueID int32, offset int64) <-chan struct{}

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
