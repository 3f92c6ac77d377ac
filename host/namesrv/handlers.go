package namesrv

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/host/remoting"
)

// routeNotFoundSuffix ends RocketMQ's remark for a route lookup miss
// (DefaultRequestProcessor / ClientRequestProcessor with
// FAQUrl.suggestTodo(APPLY_TOPIC_URL)).
const routeNotFoundSuffix = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."

// Register installs the name-server handlers on rs (before rs.Serve):
// REGISTER_BROKER, UNREGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC,
// GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
// DELETE_TOPIC_IN_NAMESRV and QUERY_DATA_VERSION, and a close hook that
// drops the brokers whose registration connection closed.
func (s *Server) Register(rs *remoting.Server) {
	rs.Handle(remoting.CodeRegisterBroker, s.handleRegister)
	rs.Handle(remoting.CodeUnregisterBroker, s.handleUnregister)
	rs.Handle(remoting.CodeGetRouteInfoByTopic, s.handleRoute)
	rs.Handle(remoting.CodeGetBrokerClusterInfo, s.handleClusterInfo)
	rs.Handle(remoting.CodeGetAllTopicListFromNameServer, s.handleTopicList)
	rs.Handle(remoting.CodeDeleteTopicInNameServer, s.handleDeleteTopic)
	rs.Handle(remoting.CodeQueryDataVersion, s.handleQueryDataVersion)
	rs.OnConnClose(func(c *remoting.Conn) { s.dropConn(c.ID()) })
}

func errorResponse(req *remoting.Request, err error) *remoting.Command {
	if errors.Is(err, errCRCMismatch) {
		return remoting.NewResponse(req.Cmd, remoting.SystemError, errCRCMismatch.Error())
	}
	return remoting.NewResponse(req.Cmd, remoting.SystemError, err.Error())
}

// handleRegister is REGISTER_BROKER (103). The answer's header carries the
// group's master and its HA address for a slave; the body (RocketMQ's
// ORDER_TOPIC_CONFIG KV table) is empty, as RocketMQ's is with no order
// topic configured.
func (s *Server) handleRegister(req *remoting.Request) *remoting.Command {
	reg, err := decodeRegister(req.Cmd)
	if err != nil {
		s.log.Warn("namesrv: bad REGISTER_BROKER", "conn", req.Conn.String(), "err", err)
		return errorResponse(req, err)
	}
	res, err := s.register(reg, req.Conn.ID())
	if err != nil {
		return errorResponse(req, err)
	}
	resp := remoting.NewResponse(req.Cmd, remoting.Success, "")
	if res.HAServerAddr != "" {
		resp.SetExt(hdrHAServerAddr, res.HAServerAddr)
	}
	if res.MasterAddr != "" {
		resp.SetExt(hdrMasterAddr, res.MasterAddr)
	}
	return resp
}

// handleUnregister is UNREGISTER_BROKER (104).
func (s *Server) handleUnregister(req *remoting.Request) *remoting.Command {
	ref, err := decodeBrokerRef(req.Cmd, "UNREGISTER_BROKER")
	if err != nil {
		return errorResponse(req, err)
	}
	s.UnregisterBroker(ref.cluster, ref.name, ref.addr, ref.id)
	return remoting.NewResponse(req.Cmd, remoting.Success, "")
}

// handleRoute is GET_ROUTEINFO_BY_TOPIC (105): header topic (required).
func (s *Server) handleRoute(req *remoting.Request) *remoting.Command {
	f := fields{cmd: req.Cmd}
	topic := f.required(hdrTopic)
	if f.err != nil {
		return remoting.NewResponse(req.Cmd, remoting.SystemError, "decoding GET_ROUTEINFO_BY_TOPIC header: "+f.err.Error())
	}
	body, err := s.lookupRoute(topic)
	switch {
	case errors.Is(err, errNoRoute):
		return remoting.NewResponse(req.Cmd, remoting.TopicNotExist, routeNotFound(topic))
	case err != nil:
		s.log.Warn("namesrv: route lookup failed", "topic", topic, "err", err)
		return remoting.NewResponse(req.Cmd, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req.Cmd, remoting.Success, "")
	resp.Body = body
	return resp
}

func routeNotFound(topic string) string {
	return "No topic route info in name server for the topic: " + topic + routeNotFoundSuffix
}

// handleClusterInfo is GET_BROKER_CLUSTER_INFO (106): every group of every
// cluster.
func (s *Server) handleClusterInfo(req *remoting.Request) *remoting.Command {
	return s.answerView(req, func(r *registry) any { return r.clusterInfo() })
}

// handleTopicList is GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): every topic
// with a route, sorted.
func (s *Server) handleTopicList(req *remoting.Request) *remoting.Command {
	return s.answerView(req, func(r *registry) any { return r.topicList() })
}

// answerView answers req with the JSON of what view builds from the
// registry (under the lock; the marshalling is not).
func (s *Server) answerView(req *remoting.Request, view func(*registry) any) *remoting.Command {
	s.mu.Lock()
	v := view(s.reg)
	s.mu.Unlock()
	resp := remoting.NewResponse(req.Cmd, remoting.Success, "")
	resp.Body = mustJSON(v)
	return resp
}

// handleDeleteTopic is DELETE_TOPIC_IN_NAMESRV (216): header topic
// (required) and clusterName (optional: only that cluster's brokers). The
// topic's route is gone until a broker's next registration lists it again,
// as in RocketMQ; admin tools delete it in the brokers first.
func (s *Server) handleDeleteTopic(req *remoting.Request) *remoting.Command {
	f := fields{cmd: req.Cmd}
	topic := f.required(hdrTopic)
	if f.err != nil {
		return remoting.NewResponse(req.Cmd, remoting.SystemError, "decoding DELETE_TOPIC_IN_NAMESRV header: "+f.err.Error())
	}
	cluster := req.Cmd.Ext(hdrClusterName)
	s.mu.Lock()
	found := s.reg.deleteTopic(topic, cluster)
	s.mu.Unlock()
	if found {
		s.log.Info("namesrv: topic deleted from the registry", "topic", topic, "cluster", cluster)
	}
	return remoting.NewResponse(req.Cmd, remoting.Success, "")
}

// handleQueryDataVersion is QUERY_DATA_VERSION (322): header brokerName,
// brokerAddr, clusterName, brokerId; body the broker's topic-table
// DataVersion JSON. The answer's header changed is "true" when this server
// holds no version for the broker or a different one; its body is the
// version held, if any. Like RocketMQ, the query renews the broker's
// registration time.
func (s *Server) handleQueryDataVersion(req *remoting.Request) *remoting.Command {
	ref, err := decodeBrokerRef(req.Cmd, "QUERY_DATA_VERSION")
	if err != nil {
		return errorResponse(req, err)
	}
	var v meta.DataVersion
	if err := json.Unmarshal(req.Cmd.Body, &v); err != nil {
		return remoting.NewResponse(req.Cmd, remoting.SystemError, "decoding QUERY_DATA_VERSION body: "+err.Error())
	}
	s.mu.Lock()
	lb := s.reg.brokers[brokerKey{ref.cluster, ref.addr}]
	var held *meta.DataVersion
	if lb != nil {
		lb.updated = s.cfg.Now()
		hv := lb.version
		held = &hv
	}
	s.mu.Unlock()
	changed := held == nil || !held.Equal(v)
	resp := remoting.NewResponse(req.Cmd, remoting.Success, "")
	resp.SetExt(hdrChanged, strconv.FormatBool(changed))
	if held != nil {
		resp.Body = mustJSON(*held)
	}
	return resp
}
