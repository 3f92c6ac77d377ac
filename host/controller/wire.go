package controller

// Header field names, RocketMQ's (request and response headers under
// remoting/protocol/header/controller and BrokerHeartbeatRequestHeader)
// and keel's additions; the handlers and the Client share them.
const (
	hdrClusterName             = "clusterName"
	hdrBrokerName              = "brokerName"
	hdrBrokerAddr              = "brokerAddr"    // BROKER_HEARTBEAT
	hdrBrokerAddress           = "brokerAddress" // CONTROLLER_REGISTER_BROKER
	hdrBrokerID                = "brokerId"
	hdrEpoch                   = "epoch"
	hdrMaxOffset               = "maxOffset"
	hdrConfirmOffset           = "confirmOffset"
	hdrHeartbeatTimeoutMills   = "heartbeatTimeoutMills"
	hdrElectionPriority        = "electionPriority"
	hdrInvokeTime              = "invokeTime"
	hdrDesignateElect          = "designateElect"
	hdrMasterBrokerID          = "masterBrokerId"
	hdrMasterAddress           = "masterAddress"
	hdrMasterEpoch             = "masterEpoch"
	hdrSyncStateSetEpoch       = "syncStateSetEpoch"
	hdrNewSyncStateSetEpoch    = "newSyncStateSetEpoch"
	hdrControllerLeaderID      = "controllerLeaderId"
	hdrControllerLeaderAddress = "controllerLeaderAddress"
	hdrIsLeader                = "isLeader"
	hdrPeers                   = "peers"
	hdrGroup                   = "group"

	// keel's: the broker's HA address and stable node id (register
	// request; see Register), and the master's HA address (answers). The
	// register answer also carries the broker's id in hdrBrokerID.
	hdrHAAddress       = "haAddress"
	hdrMasterHAAddress = "masterHaAddress"
	hdrNodeID          = "nodeId"
)

// controllerGroupName is the raft group name CONTROLLER_GET_METADATA_INFO
// reports.
const controllerGroupName = "keel-controller"

// syncStateSetBody is the body of replica answers: RocketMQ's SyncStateSet
// ({syncStateSet, syncStateSetEpoch}) plus keel's members, so that a broker
// learns every member's addresses in one call.
type syncStateSetBody struct {
	SyncStateSet      []int64  `json:"syncStateSet"`
	SyncStateSetEpoch int32    `json:"syncStateSetEpoch"`
	Members           []Member `json:"members,omitempty"`
}
