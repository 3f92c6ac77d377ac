package remoting

import (
	"errors"
	"fmt"

	"github.com/keelmq/keel/core/meta"
)

// registerAdmin installs the broker's admin request codes (topics,
// subscription groups, offsets and statistics; RocketMQ's
// AdminBrokerProcessor) on s.
func (b *Broker) registerAdmin(s *Server) {
	s.Handle(CodeUpdateAndCreateTopic, b.handleUpdateAndCreateTopic)
	s.Handle(CodeDeleteTopicInBroker, b.handleDeleteTopicInBroker)
	s.Handle(CodeGetAllTopicConfig, b.handleGetAllTopicConfig)
	s.Handle(CodeGetTopicStatsInfo, b.handleGetTopicStatsInfo)
	s.Handle(CodeUpdateAndCreateSubscriptionGroup, b.handleUpdateAndCreateSubscriptionGroup)
	s.Handle(CodeGetAllSubscriptionGroupConfig, b.handleGetAllSubscriptionGroupConfig)
	s.Handle(CodeDeleteSubscriptionGroup, b.handleDeleteSubscriptionGroup)
	s.Handle(CodeGetAllConsumerOffset, b.handleGetAllConsumerOffset)
	s.Handle(CodeGetConsumeStats, b.handleGetConsumeStats)
	s.Handle(CodeGetConsumerConnectionList, b.handleGetConsumerConnectionList)
	s.Handle(CodeGetBrokerRuntimeInfo, b.handleGetBrokerRuntimeInfo)
	s.Handle(CodeInvokeBrokerToResetOffset, b.handleInvokeBrokerToResetOffset)
	s.Handle(CodeQueryTopicConsumeByWho, b.handleQueryTopicConsumeByWho)
	// Refused: retention already trims every consume queue to the log's
	// oldest record, and removing a deleted topic's consume queues while
	// the dispatcher may write to them needs the store's own coordination,
	// which it does not offer yet. Nothing changes.
	s.Refuse(CodeCleanExpiredConsumeQueue, "CLEAN_EXPIRED_CONSUMEQUEUE is not supported by keel: retention trims every consume queue to the log's oldest record by itself")
	s.Refuse(CodeCleanUnusedTopic, "CLEAN_UNUSED_TOPIC is not supported by keel: a deleted topic's consume queues stay until retention removes their messages")
}

// adminError answers a failed admin change: INVALID_PARAMETER for a
// configuration breaking a table rule (meta.ErrInvalid), otherwise the
// code errorCodes gives the Backend's error; the remark says what was
// being done.
func adminError(req *Request, what string, err error) *Command {
	if errors.Is(err, meta.ErrInvalid) {
		return NewResponse(req.Cmd, InvalidParameter, what+": "+err.Error())
	}
	code, remark := errorResponse(err)
	return NewResponse(req.Cmd, code, what+": "+remark)
}

// checkAdminTopic is the rule for a topic an admin request creates,
// changes or deletes: a valid name that is not a system topic (the topics
// clients may not send to, and TBW102). Errors wrap meta.ErrInvalid.
func checkAdminTopic(name string) error {
	if err := meta.ValidateTopicName(name); err != nil {
		return err
	}
	if forbiddenSendTopics[name] || name == AutoCreateTopicKey {
		return fmt.Errorf("%w: %s is a system topic", meta.ErrInvalid, name)
	}
	return nil
}

// jsonResponse answers SUCCESS with v as a compact JSON body.
func jsonResponse(req *Request, v any) *Command {
	resp := NewResponse(req.Cmd, Success, "")
	resp.Body = compactJSON(v)
	return resp
}

// brokerName is the broker name queue keys carry: the Backend's when it
// is a BrokerNamer (the host's is), else DefaultBrokerName.
func (b *Broker) brokerName() string {
	if bn, ok := b.be.(BrokerNamer); ok && bn.BrokerName() != "" {
		return bn.BrokerName()
	}
	return DefaultBrokerName
}
