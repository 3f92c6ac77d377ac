// Package semantics is the message-semantics part of `keel bench`: what
// RocketMQ's delayed/timer messages and transactions cost beside plain
// sends, each measured against a fresh in-process keel node of the same
// profile in the same run (matrix.SemanticsConfig, issue #16's
// "Performance" list).
//
// Timers (RunTimers): bench/wire's load generator sends Timers messages
// with 64 producers, each carrying TIMER_DELIVER_MS = its born time plus
// a delay spread uniformly over [1s, TimerWindow], and then as many plain
// messages to a second node; the ratio of the two send rates is the
// timer's cost on the send path. Delivery is measured on the broker: once
// every timer is due and delivered (or a grace period after the last due
// time), every record of the real topic is read from the node's store and
// its store time compared with the due time it carries in
// wire.PropertyDue. Memory (VmRSS, RssAnon, Go heap of this process, which
// hosts the node and the generator) is sampled before the first send,
// after the last and after the last delivery.
//
// Transactions (RunTx): each producer sends a half message (TRAN_MSG,
// sysFlag PREPARED) and, with the offsets of its reply, END_TRANSACTION
// commit, and waits for both answers, for TxDuration; then the same
// client sends plain messages for TxDuration to a fresh node. The client
// is this package's own (txclient.go): a commit needs the reply's msgId,
// queueOffset and transactionId, which bench/wire's generator does not
// decode. rocketmq-client-go sends END_TRANSACTION oneway; waiting for its
// answer here bills each transaction for the commit too.
package semantics
