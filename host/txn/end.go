package txn

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/keelmq/keel/core/record"
)

// Errors of End; the broker answers each with RocketMQ's code.
var (
	// ErrNotMaster: the service is not running, this node is not master
	// (SLAVE_NOT_AVAILABLE).
	ErrNotMaster = errors.New("transactions are decided on the master only")
	// ErrNoHalf: no half record at the named log offset (SYSTEM_ERROR).
	ErrNoHalf = errors.New("no half message there")
	// ErrMismatch: the half record's producer group, queue offset or log
	// offset differs from the request's (SYSTEM_ERROR).
	ErrMismatch = errors.New("the half message does not match the request")
	// ErrTooLate: a decision not prompted by a check arrived after the
	// transaction timeout (ILLEGAL_OPERATION, RocketMQ's
	// rejectCommitOrRollback).
	ErrTooLate = errors.New("the transaction timed out; it is decided by a check")
	// ErrBadState: commitOrRollback is neither commit (8) nor rollback
	// (12).
	ErrBadState = errors.New("not a commit or rollback")
)

// End is one END_TRANSACTION request (RocketMQ's
// EndTransactionRequestHeader).
type End struct {
	ProducerGroup string
	// TranStateTableOffset is the half record's queue offset in HalfTopic;
	// CommitLogOffset is its log offset, by which it is found.
	TranStateTableOffset int64
	CommitLogOffset      int64
	// CommitOrRollback is record.SysFlagTransactionCommit or
	// record.SysFlagTransactionRollback (record.SysFlagTransactionNot,
	// unknown, is the caller's to drop: RocketMQ does not answer it).
	CommitOrRollback     int32
	FromTransactionCheck bool
	MsgID                string
	TransactionID        string
}

// End decides the half message e names, as RocketMQ's
// EndTransactionProcessor does:
//   - it is found by CommitLogOffset; its PGROUP, queue offset and log
//     offset must match e's (ErrNoHalf, ErrMismatch otherwise);
//   - unless FromTransactionCheck, it must be no older (by born time) than
//     the larger of Timeout and its CHECK_IMMUNITY_TIME_IN_SECONDS
//     (ErrTooLate);
//   - commit appends the real message (committed) and then, once that
//     append succeeded, the op record; rollback appends only the op
//     record.
//
// An error returned after the real message was appended (the op record's
// append failed) says so; the half message is then checked again later
// and, if the producer commits once more, delivered twice. End returns
// ErrNotMaster while the service is stopped.
func (s *Service) End(e End) error {
	if !s.Running() {
		return ErrNotMaster
	}
	commit := false
	switch e.CommitOrRollback {
	case record.SysFlagTransactionCommit:
		commit = true
	case record.SysFlagTransactionRollback:
	default:
		return fmt.Errorf("end transaction: commitOrRollback %d: %w", e.CommitOrRollback, ErrBadState)
	}
	rec, err := s.half(e)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	if !e.FromTransactionCheck {
		limit := max(s.immunity(rec), s.cfg.Timeout)
		if age := now.Sub(time.UnixMilli(rec.BornTimestamp)); age > limit {
			return fmt.Errorf("end transaction %s: born %s ago, more than %s: %w", e.TransactionID, age.Round(time.Millisecond), limit, ErrTooLate)
		}
	}
	if commit {
		m, err := committed(rec)
		if err != nil {
			return fmt.Errorf("commit transaction %s: %w", e.TransactionID, err)
		}
		if _, err := s.cfg.Append([]*record.Message{m}); err != nil {
			return fmt.Errorf("commit transaction %s: append the real message: %w", e.TransactionID, err)
		}
	}
	if _, err := s.cfg.Append([]*record.Message{opRecord(rec, now.UnixMilli())}); err != nil {
		if commit {
			return fmt.Errorf("commit transaction %s: the real message is stored but its op record is not (it will be checked again): %w", e.TransactionID, err)
		}
		return fmt.Errorf("roll back transaction %s: append the op record: %w", e.TransactionID, err)
	}
	return nil
}

// half reads and matches the half record e names.
func (s *Service) half(e End) (*record.Record, error) {
	raw, err := s.cfg.Log.ReadRecord(e.CommitLogOffset)
	if err != nil {
		return nil, fmt.Errorf("end transaction %s: read half message at %d: %w: %w", e.TransactionID, e.CommitLogOffset, ErrNoHalf, err)
	}
	rec, err := record.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("end transaction %s: decode half message at %d: %w: %w", e.TransactionID, e.CommitLogOffset, ErrNoHalf, err)
	}
	if rec.Topic != HalfTopic {
		return nil, fmt.Errorf("end transaction %s: the record at %d is in %s, not %s: %w", e.TransactionID, e.CommitLogOffset, rec.Topic, HalfTopic, ErrNoHalf)
	}
	if g := producerGroup(rec); g != e.ProducerGroup {
		return nil, fmt.Errorf("end transaction %s: the half message's producer group is %q, not %q: %w", e.TransactionID, g, e.ProducerGroup, ErrMismatch)
	}
	if rec.QueueOffset != e.TranStateTableOffset || rec.PhysOffset != e.CommitLogOffset {
		return nil, fmt.Errorf("end transaction %s: the half message is at queue offset %d, log offset %d, not %d, %d: %w",
			e.TransactionID, rec.QueueOffset, rec.PhysOffset, e.TranStateTableOffset, e.CommitLogOffset, ErrMismatch)
	}
	return rec, nil
}

// parseSeconds reads CHECK_IMMUNITY_TIME_IN_SECONDS.
func parseSeconds(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q is not a number of seconds", record.PropertyCheckImmunityTime, v)
	}
	return time.Duration(n) * time.Second, nil
}
