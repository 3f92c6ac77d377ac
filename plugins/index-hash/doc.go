// Package indexhash is keel's hash index plugin: it finds messages by key
// (the KEYS property and the client message id UNIQ_KEY, indexed as
// topic#key) in hash index files with Apache RocketMQ's IndexFile layout
// and semantics, and by offset message id, which needs no index.
//
// # Files
//
// Config.DataDir holds index files named by their creation time
// (yyyyMMddHHmmssSSS, UTC, made unique by stepping a millisecond when two
// would collide) and a checkpoint (CheckpointFile). Each index file is
// RocketMQ's: a 40-byte header, a table of hash slots and 20-byte entries
// (keyHash, phyOffset, timeDiff, prevIndex) chained newest first through
// the slots; see file.go for the byte layout. A key's hash is Java's
// String.hashCode of topic#key made non-negative, its slot the hash modulo
// the slot count. When a file is full the next one is created. Files are
// memory-mapped through core/vfs, so tests run them on vfs.NewCrashFS,
// except the slot table of the file being written, which is kept in
// memory and written into the file when it is full or the index stops
// (indexFile.own).
//
// # Use
//
// The host builds the plugin with New, calls Configure (which opens the
// directory), registers it as a dispatch listener (storehost.Listener),
// then Start. At shutdown it closes the store first (so the last dispatch
// and checkpoint reach the index), then calls Stop. Query returns
// candidate offsets; the host reads those records and keeps the ones of
// the topic and key asked for (sdk.Indexer), so hash collisions and stale
// entries never reach a client.
//
// # Differences from RocketMQ
//
//   - Re-indexing a record the index has passed cuts the index back to it
//     instead of skipping it (RocketMQ skips records below the last file's
//     endPhyOffset), so a log truncated and written again is indexed as
//     written; see Index.
//   - After a crash the last file is restored to its state at the last
//     Sync (RocketMQ deletes whole files newer than its checkpoint
//     timestamp and relies on re-dispatching them).
//   - A query matches an entry when the second it stands for meets the
//     time range, so a record stored in the same second as Begin, after
//     it, is found (RocketMQ compares the second's start and misses it).
//   - File names are UTC and made unique within a millisecond.
//
// The external form is cmd/keel-index-hash, the same plugin behind
// sdk.Serve.
package indexhash
