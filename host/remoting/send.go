package remoting

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/txn"
)

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
	txn.HalfTopic:                       true,
	txn.OpTopic:                         true,
	txn.CheckMaxTopic:                   true,
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

// handleSend answers SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
// in steps: parse and check the header, find the topic and the queue,
// build the messages, append them, then answer once the acknowledgement
// policy allows (at once on the read goroutine when AckNow knows the
// answer, otherwise from AckAsync's callback; no goroutine waits).
func (b *Broker) handleSend(req *Request, v2, batch bool) *Command {
	h, err := parseSendHeader(req.Cmd, v2)
	if err != nil {
		return NewResponse(req.Cmd, MessageIllegal, err.Error())
	}
	if resp := checkSend(req, &h, batch, b.cfg.Transactions != nil); resp != nil {
		return resp
	}
	b.resolveSendTopic(&h)
	t, resp := b.sendTopic(req, h.topic)
	if resp != nil {
		return resp
	}
	if resp := b.pickQueue(req, &h, t); resp != nil {
		return resp
	}
	msgs, resp := b.sendMessages(req, &h, batch)
	if resp != nil {
		return resp
	}
	res, err := b.be.Append(req.Context(), msgs)
	if err != nil {
		return b.appendError(req, err)
	}
	if len(res) != len(msgs) {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("store returned %d results for %d messages", len(res), len(msgs)))
	}
	resp = sendResponse(req, &h, msgs[0].StoreHost, res)
	if id := txn.TransactionID(msgs[0]); id != "" {
		// A half message (the backend rewrote it): the reply names the
		// half record and the transaction id END_TRANSACTION quotes.
		resp.ExtFields.Set("transactionId", id)
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

// checkSend refuses a send by its header alone: a topic name that is not
// one (checked here, once per send), a system topic, a transactional
// message when transactions are off (RocketMQ's rejectTransactionMessage)
// or in a batch, a batch to a retry topic. A transactional message is one
// with TRAN_MSG "true" (what RocketMQ's broker tests) or a prepared
// sysFlag; the backend stores it as a half message (txn.Rewrite).
func checkSend(req *Request, h *sendHeader, batch, transactions bool) *Command {
	if err := meta.ValidateTopicName(h.topic); err != nil {
		return NewResponse(req.Cmd, MessageIllegal, err.Error())
	}
	if forbiddenSendTopics[h.topic] {
		return NewResponse(req.Cmd, NoPermission, fmt.Sprintf("sending message to topic[%s] is forbidden", h.topic))
	}
	if tran, _ := record.GetProperty([]byte(h.properties), record.PropertyTransactionPrepared); tran == "true" || record.TransactionType(h.sysFlag) == record.SysFlagTransactionPrepared {
		if !transactions {
			return NewResponse(req.Cmd, NoPermission, "transactional messages are not enabled on this broker")
		}
		if batch {
			return NewResponse(req.Cmd, MessageIllegal, "transactional messages cannot be sent in a batch")
		}
	}
	if batch && strings.HasPrefix(h.topic, RetryGroupTopicPrefix) {
		return NewResponse(req.Cmd, MessageIllegal, "batch messages cannot be sent to a retry topic")
	}
	return nil
}

// pickQueue sets a send's queue: round robin over the write queues when
// the client left it to the broker (-1), else the client's, which must
// exist.
func (b *Broker) pickQueue(req *Request, h *sendHeader, t meta.TopicConfig) *Command {
	nq := max(t.WriteQueueNums, t.ReadQueueNums, 1)
	if h.queueID < 0 {
		h.queueID = int32(b.rr.Add(1) % uint32(max(t.WriteQueueNums, 1)))
	} else if h.queueID >= nq {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("request queueId[%d] is illegal, topic[%s] has %d queues", h.queueID, h.topic, nq))
	}
	return nil
}

// sendMessages builds the messages of a send from its header and body,
// checking each body's size and properties.
func (b *Broker) sendMessages(req *Request, h *sendHeader, batch bool) ([]*record.Message, *Command) {
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
	if !batch {
		if len(req.Cmd.Body) > maxBody {
			return nil, NewResponse(req.Cmd, MessageIllegal, fmt.Sprintf("message body of %d bytes exceeds the limit of %d", len(req.Cmd.Body), maxBody))
		}
		m := base
		m.Body = req.Cmd.Body
		m.Properties = []byte(h.properties)
		if err := checkProperties(m.Properties); err != nil {
			return nil, NewResponse(req.Cmd, MessageIllegal, err.Error())
		}
		return []*record.Message{&m}, nil
	}
	items, err := record.DecodeClientBatch(req.Cmd.Body)
	if err != nil {
		return nil, NewResponse(req.Cmd, MessageIllegal, fmt.Sprintf("decoding batch body: %v", err))
	}
	msgs := make([]*record.Message, len(items))
	for i, it := range items {
		if len(it.Body) > maxBody {
			return nil, NewResponse(req.Cmd, MessageIllegal, fmt.Sprintf("message %d of the batch: body of %d bytes exceeds the limit of %d", i, len(it.Body), maxBody))
		}
		if err := checkProperties(it.Properties); err != nil {
			return nil, NewResponse(req.Cmd, MessageIllegal, fmt.Sprintf("message %d of the batch: %v", i, err))
		}
		m := base
		m.Flag = it.Flag
		m.Body = it.Body
		m.Properties = it.Properties
		msgs[i] = &m
	}
	return msgs, nil
}

// sendResponse is the SUCCESS answer to a send stored at res: the offset
// message ids (comma-separated for a batch) and the first queue offset.
func sendResponse(req *Request, h *sendHeader, storeHost netip.AddrPort, res []core.AppendResult) *Command {
	var msgID string
	if len(res) == 1 {
		msgID = record.OffsetMsgID(storeHost, res[0].PhysOffset)
	} else {
		ids := make([]string, len(res))
		for i, r := range res {
			ids[i] = record.OffsetMsgID(storeHost, r.PhysOffset)
		}
		msgID = strings.Join(ids, ",")
	}
	resp := NewResponse(req.Cmd, Success, "")
	resp.ExtFields = Fields{
		{"msgId", msgID},
		{"queueId", strconv.Itoa(int(h.queueID))},
		{"queueOffset", i64s(res[0].QueueOffset)},
		{"MSG_REGION", "DefaultRegion"},
		{"TRACE_ON", "true"},
	}
	return resp
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
