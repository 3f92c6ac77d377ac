// Package controller is keel's cluster controller (issue #18), after
// RocketMQ 5's controller mode: a hashicorp/raft group that holds, for
// every broker group (cluster + brokerName), its members, master, master
// epoch and SyncStateSet, and elects a new master from the SyncStateSet
// when the master's heartbeats stop or its connection closes.
//
// # State and elections
//
// Replicated state (Group, per broker group) changes only through raft log entries
// applied by a deterministic state machine (commands.go, fsm.go): register
// a member, elect (or clear) a master, alter the SyncStateSet, announce the
// leader's remoting address. The raft log and stable store are one bolt
// file (Dir/raft.db); snapshots live in Dir/snapshots.
//
//   - An election sets the master, bumps the master epoch, and makes the
//     SyncStateSet {new master} with its epoch bumped. Only a member of the
//     SyncStateSet may be elected (every member at a group's first
//     election), unless the election is unclean, which the leader asks for
//     only with Config.ElectUnclean.
//   - When the master is gone and no member of the SyncStateSet is alive,
//     the master is cleared (epoch bumped, so the old master is fenced) and
//     the set is kept: its first member to return is elected.
//   - AlterSyncStateSet is accepted only from the current master at the
//     current master and set epochs; the set must hold the master and
//     members only.
//
// Liveness is the leader's memory (liveness.go), never raft state: brokers
// heartbeat to the leader, which records (epoch, maxOffset, confirmOffset)
// and the time seen. A new leader seeds every known member as just seen
// (RocketMQ #5712), and waits for a candidate's first heartbeat before
// ranking it, so the member with the most data is not passed over. Every
// ScanInterval (and at once when a heartbeat connection closes) the leader
// checks each group; the candidates are ranked by epoch, then max offset
// (both high first), election priority and broker id (low first). A group
// left without a candidate is retried every scan (RocketMQ #5009).
//
// # Timing
//
// A master whose heartbeats stop is replaced within HeartbeatTimeout plus
// one ScanInterval plus a raft commit; one whose connection closes, within
// a raft commit. A raft leader change adds the raft election (about
// RaftTimeout to 2×RaftTimeout) and, for a master that died meanwhile,
// one HeartbeatTimeout from the new leader's seeding. A broker's lease
// (it stops acknowledging writes when it cannot reach the controller) must
// be shorter than HeartbeatTimeout, so that no new master is elected while
// the old one still acknowledges; and, since a closed heartbeat connection
// triggers an election at once, it ends when that connection closes
// (Agent.Leased applies both rules).
//
// # Wire
//
// Register installs BROKER_HEARTBEAT (904) and CONTROLLER_* 1001–1006 on a
// remoting server, with RocketMQ's header names. keel's additions: the
// registration's haAddress and nodeId, the broker id in its answer
// (brokerId), masterHaAddress and the members in replica answers, and the
// replica info in heartbeat answers. Client is the broker's and the admin
// tool's side; Agent is a broker's registration and heartbeat loop on it.
package controller
