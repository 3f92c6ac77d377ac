// Package meta holds a broker's metadata tables — topics, subscription
// groups, consumer offsets and delay offsets — and persists each of them as
// JSON in its own file, replaced atomically (WriteFileAtomic) so a crash
// leaves the previous or the new version of a table, never a mixture.
//
// Every table carries a DataVersion that advances on every change. A slave
// copies the master's tables with Snapshot on the master and Apply on the
// slave, following RocketMQ's SlaveSynchronize with one deliberate change:
//
//   - Topics and subscription groups are replaced wholesale, and only when
//     the versions differ (RocketMQ's version-gated replace).
//   - Consumer offsets and delay offsets are merged by maximum per queue,
//     never lowered. RocketMQ's unconditional putAll lets a master that
//     comes back after an outage overwrite the offsets consumers committed
//     on the slave meanwhile with its stale ones, so the consumers roll back
//     and re-consume (apache/rocketmq#1094). With the maximum merge a
//     replicated offset only ever moves forward; a consumer that resets its
//     offset backwards on purpose does so through Commit on the broker it
//     talks to, which is allowed (see ConsumerOffsets.Commit).
//
// Tables are safe for concurrent use. Changes are held in memory until
// Persist (or Store.PersistAll) writes the tables that changed; the caller
// decides how often (RocketMQ persists consumer offsets every 5 s).
//
// # Files
//
//	store.go    Store: the four tables under one directory, Snapshot, Apply
//	table.go    what every table shares: its file, version, dirty tracking,
//	            loading, persisting and Apply's validate-then-apply
//	content.go  the rules the tables share about their content (set, insert,
//	            delete, version-gated replace, merge by maximum)
//	topics.go, groups.go, offsets.go, delay.go  one table each
//	validate.go the name rules and limits (ValidateTopicName)
//	version.go  DataVersion
//	atomic.go   WriteFileAtomic and ReadFile
package meta
