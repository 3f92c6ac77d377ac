package remoting

import (
	"errors"
	"strconv"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/txn"
)

// Transactions decides transactional messages: the host's txn.Service.
type Transactions interface {
	// End decides the half message e names (txn.Service.End, whose
	// errors the broker maps to response codes).
	End(e txn.End) error
}

// parseEndHeader reads END_TRANSACTION's header (RocketMQ's
// EndTransactionRequestHeader).
func parseEndHeader(cmd *Command) (txn.End, error) {
	e := &extReader{cmd: cmd}
	h := txn.End{
		ProducerGroup:        e.required("producerGroup"),
		TranStateTableOffset: e.int(64, -1, "tranStateTableOffset"),
		CommitLogOffset:      e.int(64, -1, "commitLogOffset"),
		CommitOrRollback:     int32(e.int(32, -1, "commitOrRollback")),
		FromTransactionCheck: e.bool("fromTransactionCheck"),
		MsgID:                e.required("msgId"),
		TransactionID:        e.str("transactionId"),
	}
	for _, f := range []struct {
		key string
		v   int64
	}{{"tranStateTableOffset", h.TranStateTableOffset}, {"commitLogOffset", h.CommitLogOffset}, {"commitOrRollback", int64(h.CommitOrRollback)}} {
		if f.v < 0 && e.err == nil {
			e.err = errors.New("header field " + f.key + " is missing")
		}
	}
	return h, e.err
}

// handleEndTransaction answers END_TRANSACTION (37) as RocketMQ's
// EndTransactionProcessor does: SLAVE_NOT_AVAILABLE on a slave, no answer
// at all for state 0 (unknown: the transaction stays open for a check),
// SUCCESS once committed or rolled back, SYSTEM_ERROR when the half message
// is missing or does not match, ILLEGAL_OPERATION when a decision not
// prompted by a check comes after the transaction timeout. rocketmq-client-go
// sends it oneway, so the answer is for other clients and for logs.
func (b *Broker) handleEndTransaction(req *Request) *Command {
	if b.cfg.Transactions == nil {
		return NewResponse(req.Cmd, RequestCodeNotSupported, "transactional messages are not enabled on this broker")
	}
	h, err := parseEndHeader(req.Cmd)
	if err != nil {
		return NewResponse(req.Cmd, SystemError, err.Error())
	}
	if h.CommitOrRollback == record.SysFlagTransactionNot {
		return nil
	}
	err = b.cfg.Transactions.End(h)
	switch {
	case err == nil:
		return NewResponse(req.Cmd, Success, "")
	case errors.Is(err, txn.ErrNotMaster):
		return NewResponse(req.Cmd, SlaveNotAvailable, err.Error())
	case errors.Is(err, txn.ErrTooLate):
		return NewResponse(req.Cmd, IllegalOperation, err.Error())
	case errors.Is(err, txn.ErrNoHalf), errors.Is(err, txn.ErrMismatch), errors.Is(err, txn.ErrBadState):
		b.log.Info("remoting: end transaction refused", "conn", req.Conn.String(), "err", err)
		return NewResponse(req.Cmd, SystemError, err.Error())
	}
	b.log.Error("remoting: end transaction failed", "producerGroup", h.ProducerGroup, "transactionId", h.TransactionID, "err", err)
	code, remark := errorResponse(err)
	return NewResponse(req.Cmd, code, remark)
}

// CheckTransactionState sends c (CHECK_TRANSACTION_STATE, oneway) to a
// live connection of producer group group, trying up to three connections
// in round-robin order (RocketMQ's ProducerManager.getAvailableChannel).
// It returns an error naming the group when no producer of it is
// connected or none took the request. The topic of the header is the half
// topic; the body is c.Record.
func (b *Broker) CheckTransactionState(group string, c txn.Check) error {
	conns := b.producers.conns(group)
	if len(conns) == 0 {
		return errors.New("no producer of group " + strconv.Quote(group) + " is connected")
	}
	var errs []error
	for i, conn := range conns {
		if i == 3 {
			break
		}
		cmd := &Command{Code: CodeCheckTransactionState, Flag: FlagOneway, Language: ServerLanguage, Version: ServerVersion,
			ExtFields: Fields{
				{"topic", txn.HalfTopic},
				{"tranStateTableOffset", i64s(c.TranStateTableOffset)},
				{"commitLogOffset", i64s(c.CommitLogOffset)},
				{"msgId", c.MsgID},
				{"transactionId", c.TransactionID},
				{"offsetMsgId", c.OffsetMsgID},
			},
			Body: c.Record,
		}
		err := conn.Send(cmd)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(append([]error{errors.New("no producer of group " + strconv.Quote(group) + " took the check")}, errs...)...)
}
