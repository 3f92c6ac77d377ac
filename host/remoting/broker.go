package remoting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
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

// Pull request sysFlag bits (RocketMQ PullSysFlag).
const (
	pullFlagCommitOffset = 1
	pullFlagSuspend      = 2
	pullFlagSubscription = 4
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

func (c BrokerConfig) withDefaults() BrokerConfig {
	if c.DefaultQueueNums <= 0 {
		c.DefaultQueueNums = 4
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

	rr   atomic.Uint32
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// NewBroker returns a broker role over be and starts its consumer-expiry
// sweeper.
func NewBroker(cfg BrokerConfig, be Backend) *Broker {
	cfg = cfg.withDefaults()
	b := &Broker{cfg: cfg, be: be, log: cfg.Logger, reg: newRegistry(), stop: make(chan struct{})}
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
	s.Handle(CodeHeartBeat, b.handleHeartbeat)
	s.Handle(CodeUnregisterClient, b.handleUnregister)
	s.Handle(CodeGetConsumerListByGroup, b.handleConsumerList)
	s.Handle(CodeConsumerSendMsgBack, b.handleSendBack)
	s.Handle(CodeLockBatchMQ, b.handleLockBatch)
	s.Handle(CodeUnlockBatchMQ, b.handleUnlockBatch)
	s.OnConnClose(func(c *Conn) { b.notify(b.reg.removeConn(c)) })
}

// ConsumerIDs returns the client ids registered in group, sorted.
func (b *Broker) ConsumerIDs(group string) []string { return b.reg.clientIDs(group) }

// ---- header helpers ----

type extReader struct {
	cmd *Command
	err error
}

func (e *extReader) str(keys ...string) string {
	for _, k := range keys {
		if v, ok := e.cmd.ExtFields.Get(k); ok {
			return v
		}
	}
	return ""
}

func (e *extReader) int(bits int, def int64, keys ...string) int64 {
	for _, k := range keys {
		v, ok := e.cmd.ExtFields.Get(k)
		if !ok || v == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
		if err != nil {
			if e.err == nil {
				e.err = fmt.Errorf("header field %s=%q is not an int%d", k, v, bits)
			}
			return def
		}
		return n
	}
	return def
}

func (e *extReader) required(keys ...string) string {
	v := e.str(keys...)
	if v == "" && e.err == nil {
		e.err = fmt.Errorf("header field %s is missing", keys[0])
	}
	return v
}

func (e *extReader) bool(keys ...string) bool {
	b, _ := strconv.ParseBool(e.str(keys...))
	return b
}

func i64s(n int64) string { return strconv.FormatInt(n, 10) }

// ---- send ----

type sendHeader struct {
	producerGroup     string
	topic             string
	queueID           int32
	sysFlag           int32
	bornTimestamp     int64
	flag              int32
	properties        string
	reconsumeTimes    int32
	maxReconsumeTimes int32 // -1 when absent
	batch             bool
}

// parseSendHeader reads SEND_MESSAGE's long field names, or the a..n names
// of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE.
func parseSendHeader(cmd *Command, v2 bool) (sendHeader, error) {
	e := &extReader{cmd: cmd}
	k := func(long, short string) string {
		if v2 {
			return short
		}
		return long
	}
	h := sendHeader{
		producerGroup:     e.str(k("producerGroup", "a")),
		topic:             e.required(k("topic", "b")),
		queueID:           int32(e.int(32, 0, k("queueId", "e"))),
		sysFlag:           int32(e.int(32, 0, k("sysFlag", "f"))),
		bornTimestamp:     e.int(64, 0, k("bornTimestamp", "g")),
		flag:              int32(e.int(32, 0, k("flag", "h"))),
		properties:        e.str(k("properties", "i")),
		reconsumeTimes:    int32(e.int(32, 0, k("reconsumeTimes", "j"))),
		maxReconsumeTimes: int32(e.int(32, -1, k("maxReconsumeTimes", "l"))),
		batch:             e.bool(k("batch", "m")),
	}
	return h, e.err
}

// forbiddenSendTopics are system topics clients may not send to.
var forbiddenSendTopics = map[string]bool{
	"SCHEDULE_TOPIC_XXXX":               true,
	"RMQ_SYS_TRANS_HALF_TOPIC":          true,
	"RMQ_SYS_TRANS_OP_HALF_TOPIC":       true,
	"TRANS_CHECK_MAX_TIME_TOPIC":        true,
	"SELF_TEST_TOPIC":                   true,
	"OFFSET_MOVED_EVENT":                true,
	"rmq_sys_wheel_timer":               true,
	"rmq_sys_REVIVE_LOG_DefaultCluster": true,
}

// checkProperties validates a client properties string.
func checkProperties(p []byte) error {
	if len(p) > record.MaxPropertiesSize {
		return fmt.Errorf("properties are %d bytes, longer than %d", len(p), record.MaxPropertiesSize)
	}
	if len(p) == 0 {
		return nil
	}
	if err := record.ValidateProperties(p); err != nil {
		return fmt.Errorf("malformed properties: %w", err)
	}
	return nil
}

func (b *Broker) storeHost(c *Conn) netip.AddrPort {
	if b.cfg.StoreHost.IsValid() {
		return b.cfg.StoreHost
	}
	return c.LocalAddr()
}

// resolveSendTopic applies RocketMQ's retry/DLQ rule to a send on a retry
// topic: past the group's max reconsume times the message goes to the
// group's DLQ instead.
func (b *Broker) resolveSendTopic(h *sendHeader) {
	if !strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
		return
	}
	group := strings.TrimPrefix(h.topic, RetryGroupTopicPrefix)
	maxTimes := int(h.maxReconsumeTimes)
	if maxTimes < 0 {
		maxTimes = b.maxReconsume(group)
	}
	if int(h.reconsumeTimes) >= maxTimes {
		h.topic = DLQGroupTopicPrefix + group
		h.queueID = 0
	}
}

func (b *Broker) maxReconsume(group string) int {
	if n := b.be.MaxReconsumeTimes(group); n >= 0 {
		return n
	}
	return DefaultMaxReconsumeTimes
}

// awaitAck waits for the acknowledgement of the records ending at end
// (AckAsync's answer), or for ctx to end: the client is gone.
func awaitAck(ctx context.Context, be Backend, end int64) {
	done := make(chan struct{})
	be.AckAsync(end, func(AckStatus) { close(done) })
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// groupTopicQueues is the queue count of retry and DLQ topics.
const groupTopicQueues = 1

// sendTopic finds or creates the topic of a send and checks it accepts
// writes. A non-nil response is an error to return.
func (b *Broker) sendTopic(req *Request, name string) (meta.TopicConfig, *Command) {
	auto := b.cfg.AutoCreateTopics || strings.HasPrefix(name, DLQGroupTopicPrefix)
	t, ok, err := ensureValidTopic(b.be, name, auto, b.cfg.DefaultQueueNums)
	if err != nil {
		return t, NewResponse(req.Cmd, SystemError, err.Error())
	}
	if !ok {
		return t, NewResponse(req.Cmd, TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", name))
	}
	if t.Perm != 0 && t.Perm&meta.PermWrite == 0 {
		return t, NewResponse(req.Cmd, NoPermission, fmt.Sprintf("the topic[%s] sending message is forbidden", name))
	}
	return t, nil
}

func (b *Broker) handleSend(req *Request, v2, batch bool) *Command {
	h, err := parseSendHeader(req.Cmd, v2)
	if err != nil {
		return NewResponse(req.Cmd, MessageIllegal, err.Error())
	}
	if err := meta.ValidateTopicName(h.topic); err != nil {
		return NewResponse(req.Cmd, MessageIllegal, err.Error())
	}
	if forbiddenSendTopics[h.topic] {
		return NewResponse(req.Cmd, NoPermission, fmt.Sprintf("sending message to topic[%s] is forbidden", h.topic))
	}
	if record.TransactionType(h.sysFlag) == record.SysFlagTransactionPrepared {
		return NewResponse(req.Cmd, NoPermission, "transactional messages are not supported by this broker")
	}
	if batch && strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
		return NewResponse(req.Cmd, MessageIllegal, "batch messages cannot be sent to a retry topic")
	}
	b.resolveSendTopic(&h)
	t, resp := b.sendTopic(req, h.topic)
	if resp != nil {
		return resp
	}
	nq := max(t.WriteQueueNums, t.ReadQueueNums, 1)
	if h.queueID < 0 {
		h.queueID = int32(b.rr.Add(1) % uint32(max(t.WriteQueueNums, 1)))
	} else if h.queueID >= nq {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("request queueId[%d] is illegal, topic[%s] has %d queues", h.queueID, h.topic, nq))
	}

	maxBody := b.be.MaxMessageSize()
	base := record.Message{
		Topic:          h.topic,
		QueueID:        h.queueID,
		Flag:           h.flag,
		SysFlag:        h.sysFlag,
		BornTimestamp:  h.bornTimestamp,
		BornHost:       req.Conn.RemoteAddr(),
		StoreHost:      b.storeHost(req.Conn),
		ReconsumeTimes: h.reconsumeTimes,
	}
	var msgs []*record.Message
	if batch {
		items, err := record.DecodeClientBatch(req.Cmd.Body)
		if err != nil {
			return NewResponse(req.Cmd, MessageIllegal, fmt.Sprintf("decoding batch body: %v", err))
		}
		msgs = make([]*record.Message, len(items))
		for i, it := range items {
			if len(it.Body) > maxBody {
				return NewResponse(req.Cmd, MessageIllegal, fmt.Sprintf("message %d of the batch: body of %d bytes exceeds the limit of %d", i, len(it.Body), maxBody))
			}
			if err := checkProperties(it.Properties); err != nil {
				return NewResponse(req.Cmd, MessageIllegal, fmt.Sprintf("message %d of the batch: %v", i, err))
			}
			m := base
			m.Flag = it.Flag
			m.Body = it.Body
			m.Properties = it.Properties
			msgs[i] = &m
		}
	} else {
		if len(req.Cmd.Body) > maxBody {
			return NewResponse(req.Cmd, MessageIllegal, fmt.Sprintf("message body of %d bytes exceeds the limit of %d", len(req.Cmd.Body), maxBody))
		}
		m := base
		m.Body = req.Cmd.Body
		m.Properties = []byte(h.properties)
		if err := checkProperties(m.Properties); err != nil {
			return NewResponse(req.Cmd, MessageIllegal, err.Error())
		}
		msgs = []*record.Message{&m}
	}

	res, err := b.be.Append(req.Context(), msgs)
	if err != nil {
		return b.appendError(req, err)
	}
	if len(res) != len(msgs) {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("store returned %d results for %d messages", len(res), len(msgs)))
	}
	resp = NewResponse(req.Cmd, Success, "")
	var msgID string
	if len(res) == 1 {
		msgID = record.OffsetMsgID(base.StoreHost, res[0].PhysOffset)
	} else {
		ids := make([]string, len(res))
		for i, r := range res {
			ids[i] = record.OffsetMsgID(base.StoreHost, r.PhysOffset)
		}
		msgID = strings.Join(ids, ",")
	}
	resp.ExtFields = Fields{
		{"msgId", msgID},
		{"queueId", strconv.Itoa(int(h.queueID))},
		{"queueOffset", i64s(res[0].QueueOffset)},
		{"MSG_REGION", "DefaultRegion"},
		{"TRACE_ON", "true"},
	}

	if wait, ok := record.GetProperty(msgs[0].Properties, record.PropertyWaitStoreMsgOK); ok && wait == "false" {
		return resp
	}
	end := res[len(res)-1].End()
	if st, ok := b.be.AckNow(end); ok {
		return withAckStatus(resp, st)
	}
	if reply, ok := req.Async(); ok {
		b.be.AckAsync(end, func(st AckStatus) { reply(withAckStatus(resp, st)) })
	}
	return nil
}

// withAckStatus sets a send response's code from the acknowledgement.
func withAckStatus(resp *Command, st AckStatus) *Command {
	switch st {
	case AckFlushDiskTimeout:
		resp.Code = FlushDiskTimeout
	case AckFlushSlaveTimeout:
		resp.Code = FlushSlaveTimeout
	case AckSlaveNotAvailable:
		resp.Code = SlaveNotAvailable
	}
	return resp
}

// appendError is the response to a Backend.Append error (errorCodes).
func (b *Broker) appendError(req *Request, err error) *Command {
	code, remark := errorResponse(err)
	if code == SystemError {
		b.log.Error("remoting: append failed", "err", err)
	}
	return NewResponse(req.Cmd, code, remark)
}

// ---- pull ----

type pullHeader struct {
	group          string
	topic          string
	queueID        int32
	offset         int64
	maxMsgs        int
	sysFlag        int
	commitOffset   int64
	suspend        time.Duration
	subscription   string
	expressionType string
}

func parsePullHeader(cmd *Command) (pullHeader, error) {
	e := &extReader{cmd: cmd}
	h := pullHeader{
		group:          e.required("consumerGroup"),
		topic:          e.required("topic"),
		queueID:        int32(e.int(32, 0, "queueId")),
		offset:         e.int(64, 0, "queueOffset"),
		maxMsgs:        int(e.int(32, DefaultMaxPullCount, "maxMsgNums")),
		sysFlag:        int(e.int(32, 0, "sysFlag")),
		commitOffset:   e.int(64, -1, "commitOffset"),
		suspend:        time.Duration(e.int(64, 0, "suspendTimeoutMillis")) * time.Millisecond,
		subscription:   e.str("subscription"),
		expressionType: e.str("expressionType"),
	}
	return h, e.err
}

// pullResponse builds the response for res per the store reference §9.6
// table, and reports whether the consumer is caught up (a candidate for
// long polling). It only maps: whether an answer may move the consumer
// backwards is the Backend's to decide (GetMessages answers
// core.NotYetVisible where it may not).
func pullResponse(req *Request, h *pullHeader, res core.GetResult) (resp *Command, caughtUp bool) {
	next := res.NextOffset
	var code int16
	switch res.Status {
	case core.Found:
		code = Success
	case core.OffsetOverflowOne, core.NotYetVisible:
		// Caught up (or not yet here): wait at the requested offset.
		code, next, caughtUp = PullNotFound, h.offset, true
	case core.NoMessageInQueue, core.NoMatchedLogicQueue:
		// Empty or missing queue: next is its max (0 if never written).
		if h.offset == next {
			code, caughtUp = PullNotFound, true
		} else {
			code = PullOffsetMoved
		}
	case core.OffsetTooSmall:
		code = PullOffsetMoved
	case core.OffsetOverflowBadly:
		// Corrected to max, never to 0 unless the queue is empty.
		code, next = PullOffsetMoved, res.MaxOffset
	case core.NoMatchedMessage, core.MessageWasRemoving:
		code = PullRetryImmediately
	default:
		code = SystemError
	}
	resp = NewResponse(req.Cmd, code, "")
	if code != Success {
		resp.Remark = res.Status.String()
	}
	resp.SetExt("nextBeginOffset", i64s(next))
	resp.SetExt("minOffset", i64s(res.MinOffset))
	resp.SetExt("maxOffset", i64s(res.MaxOffset))
	resp.SetExt("suggestWhichBrokerId", "0")
	if code == Success {
		resp.Body = res.Data
	}
	return resp, caughtUp
}

// readRefused is the SYSTEM_BUSY answer to a read request on a node that
// must not answer from its log (ReadAccess.Refused), or nil.
func readRefused(req *Request, acc ReadAccess) *Command {
	if acc.Refused == "" {
		return nil
	}
	return NewResponse(req.Cmd, SystemBusy, "this broker's log may be behind its replica; try again later: "+acc.Refused)
}

// commitOffset stores a consumer offset commit: as given on a node whose
// log is authoritative, only where it raises the stored offset while acc
// says the node's offsets may be incomplete.
func (b *Broker) commitOffset(acc ReadAccess, group, topic string, q int32, off int64) error {
	if acc.keepsOffsetsUp() {
		return b.be.RaiseConsumerOffset(group, topic, q, off)
	}
	return b.be.CommitConsumerOffset(group, topic, q, off)
}

// handlePull answers PULL_MESSAGE in steps: parse, commit the piggy-backed
// offset, check the topic and the subscription, then read. A pull whose
// data is already there is answered on the read goroutine; one that may
// have to wait (the consumer is caught up, or the read may block on the
// dispatcher) runs on its own goroutine (pull).
func (b *Broker) handlePull(req *Request) *Command {
	h, err := parsePullHeader(req.Cmd)
	if err != nil {
		return NewResponse(req.Cmd, SystemError, err.Error())
	}
	acc := b.be.ReadAccess()
	if resp := readRefused(req, acc); resp != nil {
		// The consumer's progress is kept (raised only) for when the
		// node can answer again; the pull itself is refused.
		b.commitPulled(acc, &h)
		return resp
	}
	p, resp := b.pullPlan(req, &h)
	if resp != nil {
		return resp
	}
	b.commitPulled(acc, &h)
	if _, hi := b.be.QueueOffsets(h.topic, h.queueID); h.offset < hi {
		// Data is there: one read, no goroutine, unless it turns out
		// the consumer is caught up after all (retention, a filter).
		if resp, wait := b.pullRound(req, &h, p, acc); !wait {
			return resp
		}
	}
	req.Go(func(ctx context.Context) *Command { return b.pull(ctx, req, &h, p, acc) })
	return nil
}

// pullPlan is what a pull reads, fixed before its first round.
type pullPlan struct {
	maxMsgs int
	filter  func(tagsCode int64) bool
	suspend time.Duration // 0: answer at once
}

// pullPlan checks the pull's topic and subscription and returns what to
// read, or the response refusing the pull.
func (b *Broker) pullPlan(req *Request, h *pullHeader) (pullPlan, *Command) {
	t, ok := b.be.Topic(h.topic)
	if !ok {
		return pullPlan{}, NewResponse(req.Cmd, TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", h.topic))
	}
	if t.Perm != 0 && t.Perm&meta.PermRead == 0 {
		return pullPlan{}, NewResponse(req.Cmd, NoPermission, fmt.Sprintf("the topic[%s] pulling message is forbidden", h.topic))
	}
	var sub subscription
	if h.sysFlag&pullFlagSubscription != 0 && h.subscription != "" {
		sub = parseSubscription(h.topic, h.subscription, h.expressionType)
	} else if s, ok := b.reg.subscription(h.group, h.topic, req.Conn); ok {
		sub = s
	}
	if sub.isSQL() {
		return pullPlan{}, NewResponse(req.Cmd, SubscriptionParseFailed, fmt.Sprintf("expression type %q is not supported (only TAG)", sub.ExpressionType))
	}
	p := pullPlan{maxMsgs: min(max(h.maxMsgs, 1), b.cfg.MaxPullCount), filter: sub.filter()}
	if h.sysFlag&pullFlagSuspend != 0 {
		p.suspend = min(h.suspend, b.cfg.MaxSuspend)
	}
	return p, nil
}

// commitPulled stores the consumer offset a pull carries, if it carries one.
func (b *Broker) commitPulled(acc ReadAccess, h *pullHeader) {
	if h.sysFlag&pullFlagCommitOffset == 0 || h.commitOffset < 0 {
		return
	}
	if err := b.commitOffset(acc, h.group, h.topic, h.queueID, h.commitOffset); err != nil {
		b.log.Warn("remoting: committing offset piggy-backed on pull", "group", h.group, "topic", h.topic, "queue", h.queueID, "err", err)
	}
}

// pullRound reads once for a pull and reports whether the pull should be
// held (the consumer is caught up and asked to wait) rather than answered
// with resp.
func (b *Broker) pullRound(req *Request, h *pullHeader, p pullPlan, acc ReadAccess) (resp *Command, wait bool) {
	if resp := readRefused(req, acc); resp != nil {
		return resp, false
	}
	res, err := b.be.GetMessages(req.Context(), h.topic, h.queueID, h.offset, p.maxMsgs, b.cfg.MaxPullBytes, p.filter)
	if err != nil {
		// The consumer retries this read every few seconds; the
		// Backend reports the failure to operators once.
		b.log.Debug("remoting: pull read failed", "topic", h.topic, "queue", h.queueID, "offset", h.offset, "err", err)
		return NewResponse(req.Cmd, SystemError, err.Error()), false
	}
	resp, caughtUp := pullResponse(req, h, res)
	return resp, caughtUp && p.suspend > 0
}

// pull runs a pull, holding it up to p.suspend while the consumer is
// caught up. Each round registers with WaitForData before reading, so an
// append between the read and the wait cannot be missed. acc is the
// ReadAccess handlePull was given, the first round's.
func (b *Broker) pull(ctx context.Context, req *Request, h *pullHeader, p pullPlan, acc ReadAccess) *Command {
	var deadline <-chan time.Time
	for round := 0; ; round++ {
		var wake <-chan struct{}
		stop := func() {}
		if p.suspend > 0 {
			wake, stop = b.be.WaitForData(h.topic, h.queueID, h.offset)
		}
		// Asked again every later round: a held pull must not outlive a
		// fence that rose meanwhile.
		if round > 0 {
			acc = b.be.ReadAccess()
		}
		resp, wait := b.pullRound(req, h, p, acc)
		if !wait {
			stop()
			return resp
		}
		if deadline == nil {
			timer := time.NewTimer(p.suspend)
			defer timer.Stop()
			deadline = timer.C
		}
		select {
		case <-wake:
			stop()
		case <-deadline:
			stop()
			return resp
		case <-b.stop:
			// Shutting down: answer "nothing new" now, so the consumer
			// does not sit out its pull timeout on a connection that is
			// about to close, and reconnects at once.
			stop()
			return resp
		case <-ctx.Done():
			stop()
			return nil
		}
	}
}

// ---- offsets ----

func (b *Broker) handleQueryConsumerOffset(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group, topic := e.required("consumerGroup"), e.required("topic")
	q := int32(e.int(32, 0, "queueId"))
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	acc := b.be.ReadAccess()
	if resp := readRefused(req, acc); resp != nil {
		return resp
	}
	off, ok := b.be.ConsumerOffset(group, topic, q)
	if !ok && acc.Trailing {
		// A replica may simply not have received the group's offsets yet:
		// neither "none" nor 0 would be true.
		return NewResponse(req.Cmd, SystemBusy, fmt.Sprintf("this broker is a replica and holds no offset of group %s for %s/%d yet; its master's offsets reach it by metadata sync; try again later", group, topic, q))
	}
	if !ok {
		// RocketMQ answers 0 for a fresh group when the queue still starts
		// at 0, so that a consumer starting from LAST_OFFSET does not skip
		// messages produced just before it started.
		if minOff, _ := b.be.QueueOffsets(topic, q); minOff > 0 {
			return NewResponse(req.Cmd, QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
		}
		off = 0
	}
	resp := NewResponse(req.Cmd, Success, "")
	resp.SetExt("offset", i64s(off))
	return resp
}

func (b *Broker) handleUpdateConsumerOffset(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group, topic := e.required("consumerGroup"), e.required("topic")
	q := int32(e.int(32, 0, "queueId"))
	off := e.int(64, -1, "commitOffset")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if off >= 0 {
		if err := b.commitOffset(b.be.ReadAccess(), group, topic, q, off); err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("committing offset: %v", err))
		}
	}
	return NewResponse(req.Cmd, Success, "")
}

func (b *Broker) queueOffsetReq(req *Request, pick func(min, max int64) int64) *Command {
	e := &extReader{cmd: req.Cmd}
	topic := e.required("topic")
	q := int32(e.int(32, 0, "queueId"))
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	lo, hi := b.be.QueueOffsets(topic, q)
	resp := NewResponse(req.Cmd, Success, "")
	resp.SetExt("offset", i64s(pick(lo, hi)))
	return resp
}

func (b *Broker) handleGetMaxOffset(req *Request) *Command {
	return b.queueOffsetReq(req, func(_, hi int64) int64 { return hi })
}

func (b *Broker) handleGetMinOffset(req *Request) *Command {
	return b.queueOffsetReq(req, func(lo, _ int64) int64 { return lo })
}

func (b *Broker) handleSearchOffset(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	topic := e.required("topic")
	q := int32(e.int(32, 0, "queueId"))
	ts := e.int(64, 0, "timestamp")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	req.Go(func(ctx context.Context) *Command {
		off, err := b.be.OffsetByTime(ctx, topic, q, ts)
		if err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("searching offset by time: %v", err))
		}
		resp := NewResponse(req.Cmd, Success, "")
		resp.SetExt("offset", i64s(off))
		return resp
	})
	return nil
}

// ---- consumer groups ----

type heartbeatBody struct {
	ClientID        string `json:"clientID"`
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDataSet []struct {
		GroupName           string `json:"groupName"`
		ConsumeType         string `json:"consumeType"`
		MessageModel        string `json:"messageModel"`
		ConsumeFromWhere    string `json:"consumeFromWhere"`
		SubscriptionDataSet []struct {
			Topic          string `json:"topic"`
			SubString      string `json:"subString"`
			SubVersion     int64  `json:"subVersion"`
			ExpressionType string `json:"expressionType"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

func (b *Broker) handleHeartbeat(req *Request) *Command {
	var hb heartbeatBody
	if err := json.Unmarshal(req.Cmd.Body, &hb); err != nil {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("decoding heartbeat body: %v", err))
	}
	if hb.ClientID == "" {
		return NewResponse(req.Cmd, SystemError, "heartbeat without clientID")
	}
	now := b.cfg.Now()
	var changed []string
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		m := &member{
			clientID:     hb.ClientID,
			conn:         req.Conn,
			lastSeen:     now,
			consumeType:  cd.ConsumeType,
			messageModel: cd.MessageModel,
			fromWhere:    cd.ConsumeFromWhere,
			subs:         make(map[string]subscription, len(cd.SubscriptionDataSet)),
		}
		for _, sd := range cd.SubscriptionDataSet {
			s := parseSubscription(sd.Topic, sd.SubString, sd.ExpressionType)
			s.SubVersion = sd.SubVersion
			m.subs[sd.Topic] = s
		}
		// The group's retry topic must have a route (RocketMQ creates it
		// on heartbeat, with one queue).
		if _, _, err := ensureTopic(b.be, RetryGroupTopicPrefix+cd.GroupName, false, groupTopicQueues); err != nil {
			b.log.Warn("remoting: creating retry topic on heartbeat", "group", cd.GroupName, "err", err)
		}
		if b.reg.heartbeat(cd.GroupName, m) {
			changed = append(changed, cd.GroupName)
		}
	}
	b.notify(changed)
	return NewResponse(req.Cmd, Success, "")
}

func (b *Broker) handleUnregister(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	clientID := e.str("clientID")
	if group := e.str("consumerGroup"); group != "" && clientID != "" {
		if b.reg.unregister(group, clientID) {
			b.notify([]string{group})
		}
	}
	return NewResponse(req.Cmd, Success, "")
}

func (b *Broker) handleConsumerList(req *Request) *Command {
	group := req.Cmd.Ext("consumerGroup")
	ids := b.reg.clientIDs(group)
	if len(ids) == 0 {
		return NewResponse(req.Cmd, SystemError, "no consumer for this group, "+group)
	}
	resp := NewResponse(req.Cmd, Success, "")
	resp.Body = compactJSON(struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}{ids})
	return resp
}

// notify tells every member of each group that the membership changed
// (NOTIFY_CONSUMER_IDS_CHANGED, oneway), without blocking the caller.
func (b *Broker) notify(groups []string) {
	for _, g := range groups {
		conns := b.reg.conns(g)
		if len(conns) == 0 {
			continue
		}
		b.log.Debug("remoting: consumer group changed", "group", g, "members", len(conns))
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for _, c := range conns {
				cmd := &Command{Code: CodeNotifyConsumerIDsChanged, Flag: FlagOneway, Language: ServerLanguage, Version: ServerVersion,
					ExtFields: Fields{{"consumerGroup", g}}}
				_ = c.Send(cmd)
			}
		}()
	}
}

func (b *Broker) sweepLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.sweep()
		case <-b.stop:
			return
		}
	}
}

// sweep drops consumers whose last heartbeat is older than ClientExpiry.
func (b *Broker) sweep() {
	changed := b.reg.expire(b.cfg.Now().Add(-b.cfg.ClientExpiry))
	if len(changed) > 0 {
		b.log.Info("remoting: expired silent consumers", "groups", changed)
	}
	b.notify(changed)
}

// ---- redelivery ----

func (b *Broker) handleSendBack(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group := e.required("group")
	phys := e.int(64, -1, "offset")
	delayLevel := int(e.int(32, 0, "delayLevel"))
	originMsgID := e.str("originMsgId")
	maxTimes := int(e.int(32, -1, "maxReconsumeTimes"))
	if e.err == nil && phys < 0 {
		e.err = errors.New("header field offset is missing")
	}
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if maxTimes < 0 {
		maxTimes = b.maxReconsume(group)
	}
	req.Go(func(ctx context.Context) *Command {
		raw, err := b.be.ReadMessage(ctx, phys)
		if err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("look message by offset %d failed: %v", phys, err))
		}
		rec, err := record.Decode(raw)
		if err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("decoding message at offset %d: %v", phys, err))
		}
		topic := RetryGroupTopicPrefix + group
		if int(rec.ReconsumeTimes) >= maxTimes || delayLevel < 0 {
			topic = DLQGroupTopicPrefix + group
		}
		if _, _, err := ensureTopic(b.be, topic, true, groupTopicQueues); err != nil {
			return NewResponse(req.Cmd, SystemError, err.Error())
		}
		props := rec.Properties
		if _, ok := record.GetProperty(props, record.PropertyRetryTopic); !ok && record.CheckProperty(record.PropertyRetryTopic, rec.Topic) == nil {
			props = record.SetProperty(props, record.PropertyRetryTopic, rec.Topic)
		}
		if originMsgID == "" {
			if id, ok := record.GetProperty(props, record.PropertyOriginMsgID); ok {
				originMsgID = id
			} else {
				originMsgID = record.OffsetMsgID(rec.StoreHost, rec.PhysOffset)
			}
		}
		if record.CheckProperty(record.PropertyOriginMsgID, originMsgID) == nil {
			props = record.SetProperty(props, record.PropertyOriginMsgID, originMsgID)
		}
		m := &record.Message{
			Topic:          topic,
			QueueID:        0,
			Flag:           rec.Flag,
			Body:           rec.Body,
			Properties:     props,
			SysFlag:        rec.SysFlag,
			BornTimestamp:  rec.BornTimestamp,
			BornHost:       rec.BornHost,
			StoreHost:      b.storeHost(req.Conn),
			ReconsumeTimes: rec.ReconsumeTimes + 1,
		}
		res, err := b.be.Append(ctx, []*record.Message{m})
		if err != nil {
			return b.appendError(req, err)
		}
		if len(res) == 1 {
			awaitAck(ctx, b.be, res[0].End())
		}
		return NewResponse(req.Cmd, Success, "")
	})
	return nil
}

// ---- lookups ----

func (b *Broker) handleViewMessage(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	phys := e.int(64, -1, "offset")
	if e.err == nil && phys < 0 {
		e.err = errors.New("header field offset is missing")
	}
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	req.Go(func(ctx context.Context) *Command {
		raw, err := b.be.ReadMessage(ctx, phys)
		if errors.Is(err, ErrCorrupt) {
			// The Backend reports the damage to operators.
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("the message at offset %d is damaged and is not served: %v", phys, err))
		}
		if err != nil {
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("can not find message by the offset %d: %v", phys, err))
		}
		resp := NewResponse(req.Cmd, Success, "")
		resp.Body = raw
		return resp
	})
	return nil
}

func (b *Broker) handleQueryMessage(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	topic, key := e.required("topic"), e.required("key")
	maxNum := int(e.int(32, 32, "maxNum"))
	begin := e.int(64, 0, "beginTimestamp")
	end := e.int(64, 0, "endTimestamp")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, e.err.Error())
	}
	if end == 0 {
		end = 1<<63 - 1
	}
	if resp := readRefused(req, b.be.ReadAccess()); resp != nil {
		return resp
	}
	req.Go(func(ctx context.Context) *Command {
		qr, err := b.be.QueryMessages(ctx, topic, key, max(maxNum, 1), begin, end)
		if err != nil {
			if code, _ := errorResponse(err); code == RequestCodeNotSupported {
				return NewResponse(req.Cmd, code, fmt.Sprintf("query by key is not available: %v", err))
			}
			return NewResponse(req.Cmd, SystemError, fmt.Sprintf("query by key: %v", err))
		}
		if len(qr.Records) == 0 {
			return NewResponse(req.Cmd, QueryNotFound, "can not find message, maybe time range not correct")
		}
		resp := NewResponse(req.Cmd, Success, "")
		n := 0
		for _, r := range qr.Records {
			n += len(r)
		}
		body := make([]byte, 0, n)
		for _, r := range qr.Records {
			body = append(body, r...)
		}
		resp.Body = body
		resp.SetExt("indexLastUpdateTimestamp", i64s(qr.IndexLastUpdateTimestamp))
		resp.SetExt("indexLastUpdatePhyoffset", i64s(qr.IndexLastUpdatePhyOffset))
		return resp
	})
	return nil
}
