package controller

import (
	"errors"
	"fmt"

	"github.com/keelmq/keel/host/remoting"
)

// Errors of the controller. Each is returned wrapped with the specifics;
// test with errors.Is. The remoting handlers turn them into RocketMQ's
// controller response codes with one table (responseCodes in handlers.go).
var (
	// ErrNotLeader: this node is not the raft leader (or lost leadership
	// before the command committed). Ask the leader.
	ErrNotLeader = errors.New("controller: not the leader")
	// ErrInvalidRequest: a required field is missing or malformed, or the
	// group is unknown.
	ErrInvalidRequest = errors.New("controller: invalid request")
	// ErrFencedMasterEpoch: the request names a master epoch other than
	// the group's current one (a stale master, or a concurrent election).
	ErrFencedMasterEpoch = errors.New("controller: master epoch fenced")
	// ErrFencedSyncStateSetEpoch: the request names a SyncStateSet epoch
	// other than the current one.
	ErrFencedSyncStateSetEpoch = errors.New("controller: SyncStateSet epoch fenced")
	// ErrInvalidMaster: the request's master is not the group's master.
	ErrInvalidMaster = errors.New("controller: not the group's master")
	// ErrInvalidReplicas: a SyncStateSet names a non-member, repeats an
	// id, or leaves out the master.
	ErrInvalidReplicas = errors.New("controller: invalid SyncStateSet")
	// ErrBrokerNotAlive: the designated broker has no live heartbeat.
	ErrBrokerNotAlive = errors.New("controller: broker not alive")
	// ErrMasterStillExist: an election was asked for while the master is
	// alive (or the designated broker is already master).
	ErrMasterStillExist = errors.New("controller: master still alive")
	// ErrElectMasterFailed: no eligible candidate, or the candidate is
	// outside the SyncStateSet of an unclean-forbidden election.
	ErrElectMasterFailed = errors.New("controller: election failed")
	// ErrBrokerIDInvalid: the broker id is not a member of the group.
	ErrBrokerIDInvalid = errors.New("controller: unknown broker id")
	// ErrNeedRegister: the broker heartbeats for a group or id the
	// controller has not registered.
	ErrNeedRegister = errors.New("controller: broker must register first")
)

// codeTable pairs each error with its RocketMQ response code; the server
// answers with the code (codeOf), the client turns it back (errorOf).
var codeTable = []struct {
	err  error
	code int16
}{
	{ErrNotLeader, remoting.ControllerNotLeader},
	{ErrInvalidRequest, remoting.ControllerInvalidRequest},
	{ErrFencedMasterEpoch, remoting.ControllerFencedMasterEpoch},
	{ErrFencedSyncStateSetEpoch, remoting.ControllerFencedSyncStateSetEpoch},
	{ErrInvalidMaster, remoting.ControllerInvalidMaster},
	{ErrInvalidReplicas, remoting.ControllerInvalidReplicas},
	{ErrBrokerNotAlive, remoting.ControllerBrokerNotAlive},
	{ErrMasterStillExist, remoting.ControllerMasterStillExist},
	{ErrElectMasterFailed, remoting.ControllerElectMasterFailed},
	{ErrBrokerIDInvalid, remoting.ControllerBrokerIDInvalid},
	{ErrNeedRegister, remoting.ControllerBrokerNeedToBeRegistered},
}

// codeOf returns the response code for err: its table entry, else
// SYSTEM_ERROR.
func codeOf(err error) int16 {
	for _, e := range codeTable {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return remoting.SystemError
}

// errorOf returns the error for a failed response: its table entry
// wrapped with the remark, else an error naming the code.
func errorOf(code int16, remark string) error {
	for _, e := range codeTable {
		if e.code == code {
			return &remoteError{remark: remark, err: e.err}
		}
	}
	return fmt.Errorf("controller answered code %d: %s", code, remark)
}

// remoteError is a controller's refusal: its remark, matching its code's
// sentinel under errors.Is.
type remoteError struct {
	remark string
	err    error
}

func (e *remoteError) Error() string {
	if e.remark == "" {
		return e.err.Error()
	}
	return "controller refused: " + e.remark
}

func (e *remoteError) Unwrap() error { return e.err }
