// Package core is keel's fixed commitlog core: preallocated segment files of
// RocketMQ v1 records, consume queues built by a dispatcher, metadata, the
// epoch history, checkpoint-based crash recovery and retention. It has no
// network and no plugins inside; flush strategies, replicators and indexers
// drive it through the methods documented here (sdk/ wraps them for
// plugins).
//
// # Positions
//
// Every store tracks, in physical commitlog offsets:
//
//	min <= dispatched <= confirm <= committed <= wrote
//	flushed <= committed
//
// wrote is where the next append goes; committed is what readers,
// replication and dispatch may see (in this implementation appends copy
// straight into the mapped segment, so committed == wrote once an append
// returns); flushed is durable on this machine; confirm is what the
// durability policy allows consumers to see (committed, flushed, or what a
// ConfirmSource such as a sync replicator says); dispatched is how far the
// consume queues and listeners have been fed.
//
// # Concurrency
//
// All exported methods are safe for concurrent use. Appends serialise on
// one lock, inside which only offsets are assigned and bytes copied:
// encoding happens before it.
//
// # Files
//
// One job per file:
//
//	store.go          the Store type, Open, the positions and their accessors
//	options.go        Options, their defaults and validation, the errors
//	append.go         Append and AppendBatch: check topics, encode, assign offsets, copy
//	prealloc.go       creating the next segment ahead of the writer
//	segment.go        one mapped commitlog file; listing the commitlog
//	wbuf.go           the optional write buffer and Commit
//	warm.go           prefaulting the active segment, writeback hints
//	raw.go            AppendRaw (replicas) and Truncate
//	flush.go          Flush and the periodic flush loop
//	wait.go           WaitFlushed, OnFlushed, WaitCommitted, WaitDispatched
//	notify.go         the broadcast notifier behind the waits
//	dispatch.go       the dispatcher feeding consume queues and listeners
//	read.go           reading records, log bytes and queues (GetMessages)
//	checkpoint.go     the checkpoint file, Checkpoint and its loop
//	tail.go           the recovery tail bound and write stalls
//	recovery.go       crash recovery on Open
//	recovery_scan.go  recovery's record scan and cut of a torn tail
//	recovery_info.go  what Open reports (RecoveryInfo)
//	retention.go      deleting old segments
//	writable.go       whether appends are accepted; the disk-full reading
//	close.go          Close and the simulated crash of tests
//	invariants*.go    position assertions under the invariants build tag
//	repair.go         offline repair; inspect.go offline inspection
package core
