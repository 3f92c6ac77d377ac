// Package replication holds the building blocks of keel's master/slave
// replication, which the async and sync plugins compose and which a custom
// replication plugin can reuse piece by piece. It depends only on sdk (the
// Host a plugin gets) and core/epoch's pure functions.
//
// # Blocks
//
//   - Framing (Conn, DecodeFrame, AppendFrame): a 1-byte type and a 4-byte
//     big-endian length, then the payload; received payloads are bounded
//     (Options.MaxFrameSize) and refused before anything is allocated.
//     Payload codecs (Hello, Auth, State, Plan, Pull, DataHeader, Heartbeat,
//     Ack, ErrorMsg) check every length against the bytes present.
//   - Authentication (ClientAuth, ServerAuth): mutual HMAC-SHA256
//     challenge-response over fresh 32-byte nonces with the shared secret
//     (sdk.Config.Secret). A slave checks the master's proof before it sends
//     its own, so neither side accepts data from a peer without the secret.
//     An empty secret on both sides is the profile's documented
//     "unauthenticated" mode (the node logs a warning).
//   - The epoch handshake (Decide): a pure function from the master's and
//     the slave's View (log range, epoch history, known takeover epochs) to
//     an action — stream (after the slave truncates to the consistent
//     point), catch up (the master is behind: it pulls the slave's extra
//     bytes first), fence (a conflict an operator must resolve) or refuse.
//   - The master side (Node in role master): per replica, a streamer that
//     reads batches with Host.ReadLog (about Options.BatchSize, whole
//     records, never across a segment — ReadLog's guarantee — nor an epoch
//     boundary, which this package enforces), heartbeats while idle and
//     metadata snapshots on Options.SyncMetaInterval; an ack reader that
//     rejects and disconnects a replica acknowledging beyond what it was
//     sent (hence beyond the master's log); the in-sync set (a replica more
//     than Options.MaxLag bytes behind leaves it); AckedOffset and the
//     in-sync count, which the acknowledgement policy (Policy,
//     Options.Policy) computes from the replicas' states — by default
//     InSyncReplicas, the WaitReplicas-th highest acknowledgement among
//     in-sync replicas; lag in bytes and seconds per replica; and the
//     fence, all reported with Host.ReportReplication.
//   - The slave side (Node in role slave): connect with exponential backoff
//     and jitter (Options.ReconnectBackoff .. ReconnectBackoffMax), send
//     State, follow the Plan (Host.TruncateLog then Host.SetEpochs with the
//     master's history clipped at the point, as core/epoch's contract asks),
//     append DATA at identical offsets with Host.AppendLog (the host
//     dispatches them into its own consume queues and indexes), record each
//     new epoch as its first batch arrives, acknowledge the received or —
//     with ack_on = "flushed" — the flushed offset (Host.Flush first), and
//     merge the master's metadata with Host.MetaApply (consumer and delay
//     offsets by maximum: nothing here ever lowers or resets an offset).
//
// # Wire protocol
//
//	slave  → CLIENT_HELLO, master → SERVER_HELLO, slave → AUTH   (ClientAuth/ServerAuth)
//	slave  → STATE{min, end, epochs, takeovers, max epoch}
//	master → PULL{from,to} ⇄ slave DATA…   (only if the master is behind; then a new epoch)
//	master → PLAN{from, epochs, ack_on_flushed}  or ERROR{fenced|refused, reason}
//	slave  → ACK{from}                       (after truncating)
//	master → DATA{offset, epoch, epoch start, committed}+bytes | HEARTBEAT | META
//	slave  → ACK{received, flushed}          (when its input drains, and at least every 250µs under load)
//
// Either side closes a connection idle for Options.IdleTimeout; the slave
// then reconnects and the handshake runs again.
//
// # Epochs, takeovers and fencing
//
// A master begins a new epoch at every start (at its committed offset) so
// that any later divergence is visible in the histories. Promote, ForceWrites
// and a node reconfigured from slave to master begin a takeover epoch,
// recorded in the node's state file (sdk.Config.DataDir/replication-state.json)
// and passed to replicas: a replica whose tail conflicts with the master's
// log is truncated only when a takeover epoch lies between its last epoch
// and the master's (the returning old master). A master whose log is a
// prefix of a replica's (it lost its disk or its unflushed tail) catches up
// from the replica before accepting a write; one that conflicts otherwise
// stays fenced (sdk.ReplicationState.Fenced, which makes the host refuse
// appends) until an operator calls ForceWrites. With Options.StartFenced =
// "empty" (the default) a master whose log is empty at start is fenced until
// a replica's handshake shows nothing was lost (the ROCKETMQ-348 case: a
// wiped master must not hand out offsets its slave already holds).
package replication
