// Package cq implements keel's consume queues: per topic/queue indexes of
// 20-byte entries that map a logical queue offset to a message's commitlog
// position, size and tag hash, laid out like Apache RocketMQ's ConsumeQueue.
//
// # On-disk layout
//
// A queue lives in {root}/{topic}/{queueId}/. Entry i of the queue sits at
// logical byte i*EntrySize. The logical space is cut into files of
// EntriesPerFile*EntrySize bytes, each named by the 20-digit zero-padded
// logical byte offset of its first entry. Files are preallocated to full size
// and memory-mapped for both writing and reading. An entry is, big-endian:
//
//	commitlog offset int64 | size int32 | tags code int64
//
// A queue whose first message is not at queue offset 0 (a slave that starts
// mid-stream, or a queue whose early files were lost) starts with the file
// that contains that first offset; the entries before it in that file are
// blank units (0, math.MaxInt32, 0), as RocketMQ's fillPreBlank writes them.
// Blank units never follow a real entry.
//
// # Derived data
//
// A consume queue is derived from the commitlog: it is rebuilt by
// re-dispatching commitlog records, and Put is idempotent for records already
// indexed (their end offset is at or below MaxPhysOffset). Recovery on open
// (OpenQueue) therefore only needs to find a plausible end; the caller (the
// store's recovery) must then apply the commitlog's minimum with
// SetMinPhysOffset and call TruncatePhys with the commitlog offset its
// re-dispatch starts from (at most the commitlog's valid end) before
// dispatching again. That drops entries of a discarded commitlog tail and
// any entry a torn write may have left behind, and re-dispatch rewrites
// them. If the commitlog is empty, Set.RemoveAll destroys every queue.
//
// Retention follows the commitlog: SetMinPhysOffset deletes whole files
// below the commitlog's new minimum (never the last file) and moves Min.
// CheckOffset classifies a consumer's offset (too small, caught up, beyond
// the end) and suggests the corrected one, as RocketMQ's pull path does.
//
// # Concurrency
//
// Each Queue has exactly one writer goroutine (the dispatcher) calling Put.
// Readers (Get, At, Min, Max, MaxPhysOffset, SearchTime) may run at any time
// from any number of goroutines: the write position is published with an
// atomic store after the entry's 20 bytes are written, so a reader never sees
// a half-written entry. Flush may run concurrently with Put and readers.
// TruncatePhys and SetMinPhysOffset must be called while no Put is running
// (dispatch paused); they take the queue's write lock, so concurrent readers
// stay safe and simply wait for them.
//
// # Files
//
//	queue.go    the Queue type, OpenQueue and its accessors
//	entry.go    the 20-byte entry and its encoding
//	file.go     one mapped queue file: naming, creating, removing
//	load.go     OpenQueue's recovery of the write position
//	put.go      Put, the single writer's append
//	read.go     At, Get, SearchTime
//	offset.go   CheckOffset and OffsetStatus
//	trim.go     TruncatePhys and SetMinPhysOffset
//	flush.go    Flush and Close
//	set.go      Set: every queue under one root
//	options.go  Options and the limits on topics and queue ids
//	errors.go   the package's errors
package cq
