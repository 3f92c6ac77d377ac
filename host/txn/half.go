package txn

import (
	"fmt"
	"strconv"

	"github.com/keelmq/keel/core/record"
)

// IsHalf reports whether m, as a client sent it, is a transaction half
// message: its TRAN_MSG property is "true" (the property, not the sysFlag,
// as RocketMQ's SendMessageProcessor tests), it is not addressed to a
// transaction system topic, and it is not a pre-4.6.1 client's redelivery
// (reconsume times above 0 together with a DELAY above 0).
func IsHalf(m *record.Message) bool {
	if v, _ := record.GetProperty(m.Properties, record.PropertyTransactionPrepared); v != "true" {
		return false
	}
	switch m.Topic {
	case HalfTopic, OpTopic, CheckMaxTopic:
		return false
	}
	if m.ReconsumeTimes > 0 {
		if d, _ := record.GetProperty(m.Properties, record.PropertyDelayLevel); d != "" {
			if n, err := strconv.Atoi(d); err == nil && n > 0 {
				return false
			}
		}
	}
	return true
}

// Rewrite turns m into its half record when IsHalf(m), as RocketMQ's
// parseHalfMessageInner does, and reports whether it did:
//   - REAL_TOPIC and REAL_QID are set to m's topic and queue;
//   - __transactionId__ is set to UNIQ_KEY (when m has one);
//   - the transaction bits of the sysFlag are reset to 0, so the half
//     record gets a consume queue entry;
//   - m moves to HalfTopic, queue 0.
//
// m.Properties is replaced, never modified in place.
func Rewrite(m *record.Message) bool {
	if !IsHalf(m) {
		return false
	}
	p := record.SetProperty(m.Properties, record.PropertyRealTopic, m.Topic)
	p = record.SetProperty(p, record.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	if id, ok := record.GetProperty(p, record.PropertyUniqKey); ok && id != "" {
		p = record.SetProperty(p, record.PropertyTransactionID, id)
	}
	m.Properties = p
	m.SysFlag = withTransactionType(m.SysFlag, record.SysFlagTransactionNot)
	m.Topic = HalfTopic
	m.QueueID = queueID
	return true
}

// TransactionID is the transaction id of a message Rewrite turned into a
// half record ("" if it has none): what the send reply names.
func TransactionID(m *record.Message) string {
	if m.Topic != HalfTopic {
		return ""
	}
	id, _ := record.GetProperty(m.Properties, record.PropertyTransactionID)
	return id
}

func withTransactionType(sysFlag, t int32) int32 {
	return sysFlag&^record.SysFlagTransactionMask | t
}

// realQueue is the real topic and queue of a half record.
func realQueue(rec *record.Record) (string, int32, error) {
	return realQueueOf(rec.Properties, rec.PhysOffset)
}

// realQueueOf reads REAL_TOPIC and REAL_QID from the properties of the
// half record at log offset at.
func realQueueOf(props []byte, at int64) (string, int32, error) {
	topic, _ := record.GetProperty(props, record.PropertyRealTopic)
	if topic == "" {
		return "", 0, fmt.Errorf("half record at %d has no %s", at, record.PropertyRealTopic)
	}
	qs, _ := record.GetProperty(props, record.PropertyRealQueueID)
	q, err := strconv.ParseInt(qs, 10, 32)
	if err != nil || q < 0 {
		return "", 0, fmt.Errorf("half record at %d has %s %q, not a queue id", at, record.PropertyRealQueueID, qs)
	}
	return topic, int32(q), nil
}

// copyOf is rec as a message to append: body, flag, sysFlag, born time and
// host, store host, reconsume times and properties kept; topic and queue
// are the caller's.
func copyOf(rec *record.Record, topic string, queue int32, props []byte) *record.Message {
	return &record.Message{
		Topic:          topic,
		QueueID:        queue,
		Flag:           rec.Flag,
		Body:           rec.Body,
		Properties:     props,
		SysFlag:        rec.SysFlag,
		BornTimestamp:  rec.BornTimestamp,
		BornHost:       rec.BornHost,
		StoreHost:      rec.StoreHost,
		ReconsumeTimes: rec.ReconsumeTimes,
	}
}

// committed is the message a commit of the half record rec appends: rec in
// its real topic and queue with the sysFlag's transaction type COMMIT,
// TRAN_MSG, REAL_TOPIC and REAL_QID removed, every other property kept
// (UNIQ_KEY among them, so clients see the same message id) and the
// prepared transaction offset set to the half record's log offset
// (RocketMQ's endMessageTransaction). The store stamps a new store time:
// unlike RocketMQ, the half record's is not kept.
func committed(rec *record.Record) (*record.Message, error) {
	topic, q, err := realQueue(rec)
	if err != nil {
		return nil, err
	}
	p := record.RemoveProperty(rec.Properties, record.PropertyTransactionPrepared)
	p = record.RemoveProperty(p, record.PropertyRealTopic)
	p = record.RemoveProperty(p, record.PropertyRealQueueID)
	m := copyOf(rec, topic, q, p)
	m.SysFlag = withTransactionType(rec.SysFlag, record.SysFlagTransactionCommit)
	m.PreparedTransactionOffset = rec.PhysOffset
	return m, nil
}

// checkTimes is rec's TRANSACTION_CHECK_TIMES, 0 when absent or malformed.
func checkTimes(rec *record.Record) int {
	v, _ := record.GetProperty(rec.Properties, record.PropertyTransactionCheckTimes)
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// putBack is the copy of the half record rec appended before its check
// (RocketMQ's putBackHalfMsgQueue): in HalfTopic with
// TRANSACTION_CHECK_TIMES = times.
func putBack(rec *record.Record, times int) *record.Message {
	p := record.SetProperty(rec.Properties, record.PropertyTransactionCheckTimes, strconv.Itoa(times))
	return copyOf(rec, HalfTopic, queueID, p)
}

// discarded is the copy of rec moved to CheckMaxTopic once checked too
// often.
func discarded(rec *record.Record) *record.Message {
	return copyOf(rec, CheckMaxTopic, queueID, rec.Properties)
}

// producerGroup is rec's PGROUP.
func producerGroup(rec *record.Record) string {
	g, _ := record.GetProperty(rec.Properties, record.PropertyProducerGroup)
	return g
}
