// Package txn implements RocketMQ's transactional messages: the half
// message rewrite, END_TRANSACTION's commit and rollback, the op log that
// records decisions, and the check service that asks producers about
// undecided half messages (CHECK_TRANSACTION_STATE).
//
// # Storage
//
// A message whose TRAN_MSG property is "true" is stored once, in the
// commitlog, as a record of HalfTopic, queue 0 (Rewrite; the host applies
// it on the write path before the store's append), with REAL_TOPIC,
// REAL_QID and __transactionId__ (= UNIQ_KEY) set and the sysFlag's
// transaction bits reset, so consumers of the real topic never see it. The
// send reply names the half record: its offset message id, its half queue
// offset and the transaction id.
//
// A decision (End) is recorded by an op record: topic OpTopic, TAGS "d",
// body the half queue offset and ",". A commit first appends the real
// message to REAL_TOPIC/REAL_QID (sysFlag COMMIT; TRAN_MSG, REAL_TOPIC and
// REAL_QID removed; UNIQ_KEY kept, so clients see one message id), then
// the op record; a rollback appends only the op record. Decisions are in
// the log, so they survive a restart and reach slaves with it.
//
// # Checks
//
// While its node is master the Service runs a check round every
// Interval (CheckOnce). Its progress, the half queue offset below which
// every half message is decided or handed on and the op queue offset
// below which no op record matters any more, is kept in the consumer
// offset table under Group (consumerOffset.json): persisted with the
// store's metadata, shipped to slaves, so a slave that becomes master
// continues from the offsets it received (a promoted node re-checks what
// the old master handled after the last shipped offsets: more checks, no
// loss). An undecided half message older than its immunity time is
// re-appended with TRANSACTION_CHECK_TIMES+1 and the copy is checked with
// a live connection of its producer group; the producer's answer names the
// copy. After MaxChecks checks it is moved to CheckMaxTopic, as RocketMQ
// 4.5.2 and later do. End answers ErrNotMaster while the service is
// stopped: a slave answers END_TRANSACTION with SLAVE_NOT_AVAILABLE.
//
// # What a crash can cause
//
// No decided or undecided half message is lost: the check service
// flushes the log before it records progress past a half record, so the
// re-appended copy that carries it on is durable first. A crash can
// cause:
//   - a commit delivered twice: kill -9 between a commit's real append and
//     its op record leaves the half message undecided; it is checked after
//     the restart and, when the producer answers commit, appended again
//     (same UNIQ_KEY). The same holds when the op record is lost because
//     the process died before the log was flushed (power loss with an
//     asynchronous flush; kill -9 keeps the page cache);
//   - repeated checks: a crash before a round's progress is persisted
//     makes the next round check the same half messages again (another
//     copy, another check); a producer that answers commit to each check
//     after a crash also causes a second delivery;
//   - a half message committed by the producer after its transaction
//     timeout is refused (ErrTooLate) and decided by a check instead.
package txn
