// Package failover measures automatic failover (issue #18): under load,
// the master of a keel broker group in cluster mode is killed with
// SIGKILL, and the part reports how long producers and a consumer are
// without service and how many acknowledged messages were lost; beside
// it, NATS JetStream R3 with its stream leader's server shut down.
//
// keel runs as separate processes, this executable re-run with ChildEnv
// set (the program's main must call MaybeChild first; bench.Main does):
// one process with the roles namesrv and controller (a single raft
// controller: it decides elections alone, which is enough for a
// benchmark of broker failover; three tolerate the loss of one), and one
// broker group of two brokers in cluster mode, with the async or sync
// replication plugin and keel's default timeouts. Every listener is on
// 127.0.0.1 with a port picked here. Each process is its own process
// group and is killed as a group; a child also exits when its standard
// input closes, so none outlives this process.
//
// The load generator speaks the RocketMQ remoting protocol: P producers,
// each on its own TCP connection with one request in flight, send
// SEND_MESSAGE to the master that GET_ROUTEINFO_BY_TOPIC on the name
// server names (broker id 0); on a transport error or an error response
// they resolve the route again (at most every 50 ms) and resend a new
// message to whatever master it names. A consumer pulls every queue from
// the route's master, or from its slave while the route lists none (as
// RocketMQ clients do). Once the name server routes to the new master,
// the old master is restarted on its own store (a paused one is killed
// first; not at once, or the controller, which counts a master whose
// connection closed dead only after controller.ClosedMasterDead, keeps it
// master): the controller makes it a slave of the new master, and
// under sync replication the new master acknowledges with SEND_OK only
// once that replica is back in its SyncStateSet (until then it answers
// SLAVE_NOT_AVAILABLE: the profile keeps min_in_sync_replicas at
// wait_replicas).
//
// Figures of one run, all measured from the kill:
//
//   - first stored: the first response to a request sent after the old
//     master was gone that stored the message (any status but an error);
//   - first SEND_OK: the first SEND_OK to such a request: from the new
//     master, or from the old master restarted, should the controller
//     have kept it master (it then elected nobody; Result.OldMasterResumed);
//   - consumer resume: the first message born after the kill that the
//     consumer receives;
//   - acknowledged lost: SEND_OK'd messages (by their KEYS id) missing
//     from the new master's queues, read by pulling every queue from
//     offset 0 after the load stopped.
package failover
