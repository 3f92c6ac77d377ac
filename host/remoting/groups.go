package remoting

import (
	"encoding/json"
	"fmt"
	"time"
)

type heartbeatBody struct {
	ClientID        string `json:"clientID"`
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDataSet []struct {
		GroupName           string `json:"groupName"`
		ConsumeType         string `json:"consumeType"`
		MessageModel        string `json:"messageModel"`
		ConsumeFromWhere    string `json:"consumeFromWhere"`
		SubscriptionDataSet []struct {
			Topic          string `json:"topic"`
			SubString      string `json:"subString"`
			SubVersion     int64  `json:"subVersion"`
			ExpressionType string `json:"expressionType"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

func (b *Broker) handleHeartbeat(req *Request) *Command {
	var hb heartbeatBody
	if err := json.Unmarshal(req.Cmd.Body, &hb); err != nil {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("decoding heartbeat body: %v", err))
	}
	if hb.ClientID == "" {
		return NewResponse(req.Cmd, SystemError, "heartbeat without clientID")
	}
	now := b.cfg.Now()
	var changed []string
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		m := &member{
			clientID:     hb.ClientID,
			conn:         req.Conn,
			lastSeen:     now,
			consumeType:  cd.ConsumeType,
			messageModel: cd.MessageModel,
			fromWhere:    cd.ConsumeFromWhere,
			subs:         make(map[string]subscription, len(cd.SubscriptionDataSet)),
		}
		for _, sd := range cd.SubscriptionDataSet {
			s := parseSubscription(sd.Topic, sd.SubString, sd.ExpressionType)
			s.SubVersion = sd.SubVersion
			if s.isSQL() {
				b.compileHeartbeatSQL(cd.GroupName, s)
			}
			m.subs[sd.Topic] = s
		}
		// The group's retry topic must have a route (RocketMQ creates it
		// on heartbeat, with one queue).
		if _, _, err := ensureTopic(b.be, RetryGroupTopicPrefix+cd.GroupName, false, groupTopicQueues); err != nil {
			b.log.Warn("remoting: creating retry topic on heartbeat", "group", cd.GroupName, "err", err)
		}
		if b.reg.heartbeat(cd.GroupName, m) {
			changed = append(changed, cd.GroupName)
		}
	}
	b.notify(changed)
	return NewResponse(req.Cmd, Success, "")
}

// checkClientBody is CHECK_CLIENT_CONFIG's body (RocketMQ
// CheckClientRequestBody).
type checkClientBody struct {
	ClientID         string `json:"clientId"`
	Group            string `json:"group"`
	SubscriptionData *struct {
		Topic          string `json:"topic"`
		SubString      string `json:"subString"`
		ExpressionType string `json:"expressionType"`
	} `json:"subscriptionData"`
}

// handleCheckClientConfig answers CHECK_CLIENT_CONFIG, which Java
// consumers send at start for each subscription that is not TAG, so that
// a subscription keel cannot filter by fails the consumer's start: SUCCESS
// for a TAG subscription or none, otherwise checkClientSQL's answer.
func (b *Broker) handleCheckClientConfig(req *Request) *Command {
	var body checkClientBody
	if err := json.Unmarshal(req.Cmd.Body, &body); err != nil {
		return NewResponse(req.Cmd, SystemError, fmt.Sprintf("decoding CHECK_CLIENT_CONFIG body: %v", err))
	}
	sd := body.SubscriptionData
	if sd == nil {
		return NewResponse(req.Cmd, Success, "")
	}
	sub := parseSubscription(sd.Topic, sd.SubString, sd.ExpressionType)
	if !sub.isSQL() {
		return NewResponse(req.Cmd, Success, "")
	}
	return checkClientSQL(req.Cmd, body.Group, sub, !b.cfg.DisablePropertyFilter)
}

func (b *Broker) handleUnregister(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	clientID := e.str("clientID")
	if group := e.str("consumerGroup"); group != "" && clientID != "" {
		if b.reg.unregister(group, clientID) {
			b.notify([]string{group})
		}
	}
	return NewResponse(req.Cmd, Success, "")
}

func (b *Broker) handleConsumerList(req *Request) *Command {
	group := req.Cmd.Ext("consumerGroup")
	ids := b.reg.clientIDs(group)
	if len(ids) == 0 {
		return NewResponse(req.Cmd, SystemError, "no consumer for this group, "+group)
	}
	resp := NewResponse(req.Cmd, Success, "")
	resp.Body = compactJSON(struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}{ids})
	return resp
}

// notify tells every member of each group that the membership changed
// (NOTIFY_CONSUMER_IDS_CHANGED, oneway), without blocking the caller.
func (b *Broker) notify(groups []string) {
	for _, g := range groups {
		conns := b.reg.conns(g)
		if len(conns) == 0 {
			continue
		}
		b.log.Debug("remoting: consumer group changed", "group", g, "members", len(conns))
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for _, c := range conns {
				cmd := &Command{Code: CodeNotifyConsumerIDsChanged, Flag: FlagOneway, Language: ServerLanguage, Version: ServerVersion,
					ExtFields: Fields{{"consumerGroup", g}}}
				_ = c.Send(cmd)
			}
		}()
	}
}

func (b *Broker) sweepLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.sweep()
		case <-b.stop:
			return
		}
	}
}

// sweep drops consumers whose last heartbeat is older than ClientExpiry.
func (b *Broker) sweep() {
	changed := b.reg.expire(b.cfg.Now().Add(-b.cfg.ClientExpiry))
	if len(changed) > 0 {
		b.log.Info("remoting: expired silent consumers", "groups", changed)
	}
	b.notify(changed)
}
