// Package schedule implements RocketMQ's delay levels: the level table,
// the rewrite of a delayed message into the schedule topic, and the
// delivery service that moves each one to its real queue when it is due.
//
// # Storage
//
// A message sent with property DELAY = n > 0 is stored once, in the
// commitlog, as a record of Topic (SCHEDULE_TOPIC_XXXX), queue n-1 (n
// clamped to the table's last level), with its real topic and queue in
// REAL_TOPIC and REAL_QID (Levels.Rewrite; the host applies it on every
// write path before the store's append). The record is due at its store
// timestamp plus the level's delay. The consume queue entry keeps the tags
// code core computes from TAGS; due times come from the records.
//
// # Delivery
//
// The Service runs one loop per level while its node is master. A loop
// reads its schedule queue in order from the level's offset in the delay
// offset table (core/meta DelayOffsets, delayOffset.json), and appends for
// each due record a new record to REAL_TOPIC/REAL_QID with DELAY (and the
// timer properties) removed and every other property kept, UNIQ_KEY among
// them, so clients and queries see the same message id (Deliver). It never
// appends a record before it is due by the service's clock; when the head
// of the queue is not due, the loop sleeps until it is. An idle loop waits
// for Notify (the host calls it after appending a schedule record) or a
// recheck every idleRecheck; it does not poll faster.
//
// A level's offset advances past a delivery only once the delivered record
// is flushed and as durable as an acknowledged send is (Config.Durable:
// replicated too where the node's policy waits for replicas), in queue
// order. The service flushes the log itself (Config.Flush) at most every
// persistEvery while deliveries wait, and persists the table (atomically,
// meta.WriteFileAtomic) right after, besides the store's own periodic
// persist and the one at close. Slaves receive the table with the rest of the metadata and
// merge it by maximum; a node that becomes master starts from what it
// holds.
//
// # What a crash can cause
//
// Delivery is at least once. No due message is lost: its offset moves
// only after its delivered copy is durable, so after kill -9 or power loss
// either the copy survives or the offset still points at the schedule
// record, which is delivered again. A message can be delivered twice: one
// whose copy was appended but whose offset was not yet persisted when the
// process died (kill -9, power loss) is appended again after restart,
// with the same UNIQ_KEY. The window is the time from a delivery's append
// to the persist of its offset: up to persistEvery (100 ms) plus one
// fsync of the log and one write of delayOffset.json, plus the replica
// acknowledgement where the policy waits for one. After a promotion, the
// window is instead the lag of the metadata shipped to the slave. A clean
// Stop flushes and persists, so it causes no duplicates. Delayed records that retention deletes before
// they are delivered are lost (logged), as in RocketMQ.
package schedule
