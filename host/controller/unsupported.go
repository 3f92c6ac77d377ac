package controller

import (
	"fmt"

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

// notSupported answers REQUEST_CODE_NOT_SUPPORTED with what keel does
// instead of req's code.
func notSupported(req *remoting.Request) *remoting.Command {
	remark, ok := unsupported[req.Cmd.Code]
	if !ok {
		remark = fmt.Sprintf("request code %d not supported", req.Cmd.Code)
	}
	return remoting.NewResponse(req.Cmd, remoting.RequestCodeNotSupported, remark)
}

// registerUnsupported makes rs refuse every code in unsupported, naming
// what keel does instead (a controller's server).
func registerUnsupported(rs *remoting.Server) {
	for code := range unsupported {
		rs.Handle(code, notSupported)
	}
}

// RegisterBrokerRefusals makes a broker's remoting server rs refuse the
// controller-to-broker codes keel does not send (NOTIFY_BROKER_ROLE_CHANGED),
// naming what keel does instead. Call it before rs serves.
func RegisterBrokerRefusals(rs *remoting.Server) {
	rs.Handle(remoting.CodeNotifyBrokerRoleChanged, notSupported)
}
