package controller

import (
	"github.com/keelmq/keel/host/remoting"
)

// unsupported holds, for each RocketMQ controller-mode code keel does not
// implement, what keel does instead: the remark of its
// REQUEST_CODE_NOT_SUPPORTED answer. This is the one home of those texts.
var unsupported = map[int16]string{
	remoting.CodeNotifyBrokerRoleChanged: "NOTIFY_BROKER_ROLE_CHANGED (1008) is not used by keel: a broker learns elections " +
		"and role changes from the replica info in the controller's BROKER_HEARTBEAT (904) answers",
	remoting.CodeCleanBrokerData: "CLEAN_BROKER_DATA (1011) is not supported: keel's controller never removes a member " +
		"(broker ids are not reused); a broker whose disk was wiped registers as a new member outside the SyncStateSet",
	remoting.CodeControllerGetNextBrokerID: "CONTROLLER_GET_NEXT_BROKER_ID (1012) is not supported: " + idsAtRegister,
	remoting.CodeControllerApplyBrokerID:   "CONTROLLER_APPLY_BROKER_ID (1013) is not supported: " + idsAtRegister,
}

// idsAtRegister is how keel allocates broker ids instead of 1012/1013.
const idsAtRegister = "keel's controller gives a broker its id in the answer to CONTROLLER_REGISTER_BROKER (1003), " +
	"by its nodeId (else its address)"

// registerUnsupported makes rs refuse every code in unsupported, naming
// what keel does instead (a controller's server).
func registerUnsupported(rs *remoting.Server) {
	for code, remark := range unsupported {
		rs.Refuse(code, remark)
	}
}

// RegisterBrokerRefusals makes a broker's remoting server rs refuse the
// controller-to-broker codes keel does not send (NOTIFY_BROKER_ROLE_CHANGED),
// naming what keel does instead. Call it before rs serves.
func RegisterBrokerRefusals(rs *remoting.Server) {
	rs.Refuse(remoting.CodeNotifyBrokerRoleChanged, unsupported[remoting.CodeNotifyBrokerRoleChanged])
}
