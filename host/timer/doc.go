// Package timer implements RocketMQ 5's timer messages: the rewrite of a
// message carrying TIMER_DELAY_SEC, TIMER_DELAY_MS or TIMER_DELIVER_MS into
// the timer topic (Rule.Rewrite), an on-disk index of pending timers by due
// time, and the delivery service that moves each to its real queue when
// due (Service).
//
// # Storage
//
// A timer message is stored once, in the commitlog, as a record of Topic
// (rmq_sys_wheel_timer), queue 0, with its due time in TIMER_OUT_MS and
// its real topic and queue in REAL_TOPIC and REAL_QID. The index lives in
// <store.dir>/timer (docs/formats.md, "Timer messages"):
//
//   - timerlog/: 40-byte units (due time, the record's commitlog offset and
//     size, the position of the previous unit of the same slot), in 5 MiB
//     segments; a segment is removed once every unit in it is delivered;
//   - timerwheel: one 32-byte slot per tick (due time / precision), ring of
//     2 × max delay / precision + 2 slots, each the head of its chain;
//   - checkpoint.json: the durable end of the log, the timer queue offset
//     indexed, the first tick not yet delivered, and each segment's
//     highest tick; written atomically after the log and then the wheel
//     are synced.
//
// Memory does not grow with the number of pending timers: a 64 KiB write
// buffer, the wheel slots changed since the last checkpoint (at most one
// per slot), the 1 MiB hand-off ring (below), a 64 KiB block of the log
// being walked and one chunk of at most 65 536 units of the slot being
// delivered.
//
// # Delivery
//
// The service runs while its node is master. One loop indexes the timer
// queue from the checkpoint's offset, in queue order, appending a unit per
// record to the slot of its tick (a tick already being delivered moves to
// the next). It takes each record's position, size and due time from the
// send path's hand-off (Service.Appended, a ring of the last 32 768 timer
// records appended) and reads the record from the log only when the ring
// lacks its queue offset: after a start, when an appender has not reported
// yet, or when the loop fell a ring behind. The ring is a cache of what
// the log holds, so what the index and its checkpoint say is the same
// either way.
// Another walks tick after tick from the checkpoint's first undelivered
// one, once the tick's start has come: it reads the slot's chain, sorts
// it by due time and appends each timer's copy to REAL_TOPIC/REAL_QID at
// its due time, never before, with the timer properties, TIMER_OUT_MS,
// REAL_TOPIC and REAL_QID removed and every other property kept (UNIQ_KEY
// among them). A tick counts as delivered once its copies are flushed and
// acknowledged by the node's policy; the checkpoint records it at most
// every 100 ms. The walk does not wait for that: a third loop confirms
// the walked ticks in order while the walk goes on, up to 1 024 ticks
// ahead, so that a master whose acknowledgements wait (a sync master with
// no in-sync replica, which still stores) delivers on time. The first undelivered tick's time is also published in the
// delay offset table (key ProgressKey), which reaches slaves with the
// store's metadata: a node that becomes master, or whose index is missing
// or older than that, rebuilds its index from the timer queue, skipping
// the timers due before it.
//
// # What a crash can cause
//
// Delivery is at least once. After kill -9 or power loss the index is
// reopened at its checkpoint: the log is cut at its durable end, wheel
// slots that point past it are walked back, and the timer queue is read
// again from the checkpointed offset, so no timer is lost. A timer is
// delivered twice only if its tick was delivered but not yet checkpointed
// (up to one tick plus 100 ms, plus a flush and the replica acknowledgement
// where the policy waits for one: while no replica acknowledges, every
// tick walked since), or, after a promotion, within the lag
// of the metadata shipped to the slave. A clean Stop saves, so it causes
// no duplicates. Timer records that retention deletes before they are
// delivered are lost (logged), as in RocketMQ.
package timer
