package remoting

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Need is what a request does with a resource, for access control (an
// ACL decides whether the caller may): publish to it, subscribe to it, or
// either.
type Need uint8

const (
	// NeedPub: the request writes messages to a topic.
	NeedPub Need = 1 << iota
	// NeedSub: the request reads a topic, or acts as a consumer group.
	NeedSub
)

// Resource is one topic or consumer group a request touches.
type Resource struct {
	// Name is the topic's or the group's name (a group without its
	// RetryGroupTopicPrefix).
	Name string
	// Group is true for a consumer group, false for a topic.
	Group bool
	// Need is what the request does with it.
	Need Need
}

// String says what the request does: "publish to topic \"t\"",
// "subscribe to topic \"t\"" or "consume as group \"g\"".
func (r Resource) String() string {
	switch {
	case r.Group:
		return fmt.Sprintf("consume as group %q (SUB)", r.Name)
	case r.Need == NeedPub:
		return fmt.Sprintf("publish to topic %q (PUB)", r.Name)
	default:
		return fmt.Sprintf("subscribe to topic %q (SUB)", r.Name)
	}
}

// adminCodes are the requests only an admin account may make: RocketMQ's
// Permission.ADMIN_CODE (create or delete a topic or a subscription group,
// update the broker's config) and, beyond RocketMQ, resetting a group's
// offsets (INVOKE_BROKER_TO_RESET_OFFSET moves every consumer of a group).
var adminCodes = map[int16]bool{
	CodeUpdateAndCreateTopic:             true,
	codeUpdateBrokerConfig:               true,
	CodeDeleteTopicInBroker:              true,
	CodeUpdateAndCreateSubscriptionGroup: true,
	CodeDeleteSubscriptionGroup:          true,
	CodeInvokeBrokerToResetOffset:        true,
}

// codeUpdateBrokerConfig is UPDATE_BROKER_CONFIG (25), which keel does not
// serve; an ACL still holds it to admin accounts, as RocketMQ does.
const codeUpdateBrokerConfig int16 = 25

// RequestAccess says what the broker request cmd touches, for access
// control: the topics and consumer groups it publishes to or subscribes
// to, and whether only an admin may make it. It reads the same header
// fields (and, for HEART_BEAT, the same body) the request's handler reads,
// with the rules of RocketMQ's PlainAccessValidator:
//
//   - SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE: PUB on the topic;
//     for a group's retry topic (RetryGroupTopicPrefix), SUB on the group;
//   - PULL_MESSAGE: SUB on the topic and on the consumer group;
//   - UPDATE_CONSUMER_OFFSET: SUB on the group and the topic;
//   - QUERY_MESSAGE: SUB on the topic;
//   - CONSUMER_SEND_MSG_BACK: SUB on the group;
//   - HEART_BEAT: SUB on each consumer group and on each topic it
//     subscribes to (SUB on the group for its retry topic);
//   - UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP: SUB on the group;
//   - the admin codes (adminCodes): admin, no resource;
//   - every other code: nothing (a valid signature is enough).
//
// A header that lacks a field the check needs is an error: the request
// is refused rather than let through unchecked.
func RequestAccess(cmd *Command) (res []Resource, admin bool, err error) {
	if adminCodes[cmd.Code] {
		return nil, true, nil
	}
	e := &extReader{cmd: cmd}
	switch cmd.Code {
	case CodeSendMessage, CodeSendMessageV2, CodeSendBatchMessage:
		h, err := parseSendHeader(cmd, cmd.Code != CodeSendMessage)
		if err != nil {
			return nil, false, err
		}
		return []Resource{publishTo(h.topic)}, false, nil
	case CodePullMessage:
		h, err := parsePullHeader(cmd)
		if err != nil {
			return nil, false, err
		}
		return []Resource{subscribeTo(h.topic), {Name: h.group, Group: true, Need: NeedSub}}, false, nil
	case CodeUpdateConsumerOffset:
		group, topic := e.required("consumerGroup"), e.required("topic")
		if e.err != nil {
			return nil, false, e.err
		}
		return []Resource{{Name: group, Group: true, Need: NeedSub}, subscribeTo(topic)}, false, nil
	case CodeQueryMessage:
		topic := e.required("topic")
		if e.err != nil {
			return nil, false, e.err
		}
		return []Resource{subscribeTo(topic)}, false, nil
	case CodeConsumerSendMsgBack:
		return groupAccess(e, "group")
	case CodeUnregisterClient, CodeGetConsumerListByGroup:
		return groupAccess(e, "consumerGroup")
	case CodeHeartBeat:
		var hb heartbeatBody
		if err := json.Unmarshal(cmd.Body, &hb); err != nil {
			return nil, false, fmt.Errorf("decoding heartbeat body: %w", err)
		}
		for _, cd := range hb.ConsumerDataSet {
			if cd.GroupName == "" {
				continue
			}
			res = append(res, Resource{Name: cd.GroupName, Group: true, Need: NeedSub})
			for _, sd := range cd.SubscriptionDataSet {
				res = append(res, subscribeTo(sd.Topic))
			}
		}
		return res, false, nil
	}
	return nil, false, nil
}

// groupAccess is SUB on the group the header field key names.
func groupAccess(e *extReader, key string) ([]Resource, bool, error) {
	group := e.required(key)
	if e.err != nil {
		return nil, false, e.err
	}
	return []Resource{{Name: group, Group: true, Need: NeedSub}}, false, nil
}

// publishTo is PUB on topic, or SUB on the group whose retry topic it is
// (a consumer sending a message back to be retried).
func publishTo(topic string) Resource {
	if g, ok := strings.CutPrefix(topic, RetryGroupTopicPrefix); ok {
		return Resource{Name: g, Group: true, Need: NeedSub}
	}
	return Resource{Name: topic, Need: NeedPub}
}

// subscribeTo is SUB on topic, or on the group whose retry topic it is.
func subscribeTo(topic string) Resource {
	if g, ok := strings.CutPrefix(topic, RetryGroupTopicPrefix); ok {
		return Resource{Name: g, Group: true, Need: NeedSub}
	}
	return Resource{Name: topic, Need: NeedSub}
}
