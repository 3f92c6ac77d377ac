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
	set := []string{record.PropertyRealTopic, m.Topic, record.PropertyRealQueueID, strconv.Itoa(int(m.QueueID))}
	if id, ok := record.GetProperty(m.Properties, record.PropertyUniqKey); ok && id != "" {
		set = append(set, record.PropertyTransactionID, id)
	}
	m.Properties = record.EditProperties(m.Properties, nil, set...)
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

// copyOf is rec as a message to append (Record.Message) with topic, queue
// and properties the caller's.
func copyOf(rec *record.Record, topic string, queue int32, props []byte) *record.Message {
	m := rec.Message()
	m.Topic, m.QueueID, m.Properties = topic, queue, props
	return m
}

// committed is the message a commit of the half record rec appends: rec in
// its real topic and queue with the sysFlag's transaction type COMMIT,
// TRAN_MSG, REAL_TOPIC and REAL_QID removed, every other property kept
// (UNIQ_KEY among them, so clients see the same message id) and the
// prepared transaction offset set to the half record's log offset
// (RocketMQ's endMessageTransaction). The store stamps a new store time:
// unlike RocketMQ, the half record's is not kept.
func committed(rec *record.Record) (*record.Message, error) {
	m, err := record.ToRealTarget(rec, record.PropertyTransactionPrepared, record.PropertyRealTopic, record.PropertyRealQueueID)
	if err != nil {
		return nil, fmt.Errorf("half %w", err)
	}
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
