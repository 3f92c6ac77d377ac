package remoting

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/keelmq/keel/core/meta"
)

// handleUpdateAndCreateSubscriptionGroup is
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): the body is RocketMQ's
// SubscriptionGroupConfig JSON; fields keel does not keep are ignored and
// missing ones take meta.DefaultSubscriptionGroup's values. A body that is
// not such JSON is SYSTEM_ERROR, a bad name or count INVALID_PARAMETER;
// nothing changes then.
func (b *Broker) handleUpdateAndCreateSubscriptionGroup(req *Request) *Command {
	var c meta.SubscriptionGroupConfig
	if err := json.Unmarshal(req.Cmd.Body, &c); err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding SubscriptionGroupConfig body: "+err.Error())
	}
	if err := b.be.PutSubscriptionGroup(c); err != nil {
		return adminError(req, "updating subscription group "+c.GroupName, err)
	}
	return NewResponse(req.Cmd, Success, "")
}

// subscriptionGroupWrapper is GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body
// (RocketMQ's SubscriptionGroupWrapper): the table and its version, with
// an empty forbiddenTable (keel has no per-topic group bans).
type subscriptionGroupWrapper struct {
	meta.SubscriptionGroupsSnapshot
	ForbiddenTable map[string]json.RawMessage `json:"forbiddenTable"`
}

// handleGetAllSubscriptionGroupConfig is GET_ALL_SUBSCRIPTIONGROUP_CONFIG
// (201), standard JSON (rocketmq-client-go decodes it with encoding/json).
func (b *Broker) handleGetAllSubscriptionGroupConfig(req *Request) *Command {
	return jsonResponse(req, subscriptionGroupWrapper{b.be.SubscriptionGroupSnapshot(), map[string]json.RawMessage{}})
}

// handleDeleteSubscriptionGroup is DELETE_SUBSCRIPTIONGROUP (207): header
// groupName (required) and cleanOffset (default false). Deleting a group
// that does not exist succeeds, as in RocketMQ.
func (b *Broker) handleDeleteSubscriptionGroup(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group := e.required("groupName")
	clean := e.bool("cleanOffset")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding DELETE_SUBSCRIPTIONGROUP header: "+e.err.Error())
	}
	what := "deleting subscription group " + group
	if err := meta.ValidateGroupName(group); err != nil {
		return adminError(req, what, err)
	}
	if _, err := b.be.DeleteSubscriptionGroup(group, clean); err != nil {
		return adminError(req, what, err)
	}
	return NewResponse(req.Cmd, Success, "")
}

// handleGetAllConsumerOffset is GET_ALL_CONSUMER_OFFSET (43): every
// group's committed offsets, {"dataVersion":{...},"offsetTable":
// {"topic@group":{queueId:offset}}} with fastjson's bare integer keys.
func (b *Broker) handleGetAllConsumerOffset(req *Request) *Command {
	s := b.be.ConsumerOffsetSnapshot()
	resp := NewResponse(req.Cmd, Success, "")
	resp.Body = encodeConsumerOffsets(s.Offsets, compactJSON(s.DataVersion))
	return resp
}

// consumerConnection is GET_CONSUMER_CONNECTION_LIST's body (RocketMQ's
// ConsumerConnection).
type consumerConnection struct {
	ConnectionSet     []connectionInfo            `json:"connectionSet"`
	ConsumeFromWhere  string                      `json:"consumeFromWhere,omitempty"`
	ConsumeType       string                      `json:"consumeType,omitempty"`
	MessageModel      string                      `json:"messageModel,omitempty"`
	SubscriptionTable map[string]subscriptionData `json:"subscriptionTable"`
}

// connectionInfo is one member: RocketMQ's Connection without language and
// version, which the registry does not record.
type connectionInfo struct {
	ClientAddr string `json:"clientAddr"`
	ClientID   string `json:"clientId"`
}

// subscriptionData is one topic subscription (RocketMQ's
// SubscriptionData, the fields keel keeps).
type subscriptionData struct {
	ExpressionType string `json:"expressionType"`
	SubString      string `json:"subString"`
	SubVersion     int64  `json:"subVersion"`
	Topic          string `json:"topic"`
}

// handleGetConsumerConnectionList is GET_CONSUMER_CONNECTION_LIST (203):
// the live members of consumerGroup and their subscriptions, or
// CONSUMER_NOT_ONLINE when it has none.
func (b *Broker) handleGetConsumerConnectionList(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	group := e.required("consumerGroup")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding GET_CONSUMER_CONNECTION_LIST header: "+e.err.Error())
	}
	cc, ok := b.reg.connection(group)
	if !ok {
		return NewResponse(req.Cmd, ConsumerNotOnline, fmt.Sprintf("the consumer group[%s] not online", group))
	}
	return jsonResponse(req, cc)
}

// connection describes group's live members, false when it has none.
func (r *registry) connection(group string) (consumerConnection, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if len(g) == 0 {
		return consumerConnection{}, false
	}
	cc := consumerConnection{SubscriptionTable: map[string]subscriptionData{}}
	for _, m := range g {
		ci := connectionInfo{ClientID: m.clientID}
		if m.conn != nil {
			ci.ClientAddr = m.conn.RemoteAddr().String()
		}
		cc.ConnectionSet = append(cc.ConnectionSet, ci)
		cc.ConsumeFromWhere, cc.ConsumeType, cc.MessageModel = m.fromWhere, m.consumeType, m.messageModel
		for topic, s := range m.subs {
			if old, ok := cc.SubscriptionTable[topic]; !ok || s.SubVersion > old.SubVersion {
				cc.SubscriptionTable[topic] = subscriptionData{ExpressionType: s.ExpressionType, SubString: s.SubString, SubVersion: s.SubVersion, Topic: topic}
			}
		}
	}
	slices.SortFunc(cc.ConnectionSet, func(a, b connectionInfo) int {
		if a.ClientID < b.ClientID {
			return -1
		}
		if a.ClientID > b.ClientID {
			return 1
		}
		return 0
	})
	return cc, true
}
