package remoting

// A single-broker name server, for this package's own tests: the real
// one is host/namesrv, which imports this package.

import (
	"encoding/json"
	"log/slog"
	"slices"

	"github.com/keelmq/keel/core/meta"
)

// BrokerIdentity is what route data says about the one broker this process
// runs.
type BrokerIdentity struct {
	// Cluster is the cluster name (DefaultCluster when empty).
	Cluster string
	// Name is the broker name (DefaultBrokerName when empty).
	Name string
	// MasterAddr is the master's advertised "host:port", exactly as
	// clients must dial it (route data gives it as broker id 0). Required.
	MasterAddr string
	// SlaveAddr is the slave's advertised "host:port" (broker id 1), or
	// "" when there is none.
	SlaveAddr string
}

// RouteSource supplies the name-server role with route data. It must be
// safe for concurrent use; Identity is called on every lookup, so a slave
// address that changes at run time is picked up at once.
type RouteSource interface {
	TopicTable
	// TopicSnapshot returns a copy of the topic table (see AdminBackend).
	TopicSnapshot() meta.TopicsSnapshot
	// Identity returns the broker's identity.
	Identity() BrokerIdentity
}

// NameServerConfig configures the name-server role.
type NameServerConfig struct {
	// AutoCreateTopics creates an unknown (validly named) topic with
	// DefaultQueueNums queues when its route is looked up, so consumers can
	// start before anything was produced and producers need not fall back
	// to TBW102. Retry topics (%RETRY%<group>) are always created, with one
	// queue, whatever this says: every clustering consumer asks for one.
	AutoCreateTopics bool
	// DefaultQueueNums is the queue count of auto-created topics; default 4.
	DefaultQueueNums int32
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// NameServer answers the name-server requests of RocketMQ clients for a
// single broker (or master/slave pair): GET_ROUTEINFO_BY_TOPIC,
// GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER and
// DELETE_TOPIC_IN_NAMESRV. Register it on a Server with Register.
type NameServer struct {
	cfg NameServerConfig
	src RouteSource
	log *slog.Logger
}

// NewNameServer returns a name-server role over src.
func NewNameServer(cfg NameServerConfig, src RouteSource) *NameServer {
	if cfg.DefaultQueueNums <= 0 {
		cfg.DefaultQueueNums = DefaultQueueNums
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &NameServer{cfg: cfg, src: src, log: cfg.Logger}
}

// Register installs the name-server handlers on s (before s.Serve).
func (n *NameServer) Register(s *Server) {
	s.Handle(CodeGetRouteInfoByTopic, n.handleRoute)
	s.Handle(CodeGetBrokerClusterInfo, n.handleClusterInfo)
	s.Handle(CodeGetAllTopicListFromNameServer, n.handleTopicList)
	s.Handle(CodeDeleteTopicInNameServer, n.handleDeleteTopic)
}

func (id BrokerIdentity) withDefaults() BrokerIdentity {
	if id.Cluster == "" {
		id.Cluster = DefaultCluster
	}
	if id.Name == "" {
		id.Name = DefaultBrokerName
	}
	return id
}

type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
}

type brokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

type topicRouteData struct {
	OrderTopicConf    string                     `json:"orderTopicConf"`
	QueueDatas        []queueData                `json:"queueDatas"`
	BrokerDatas       []brokerData               `json:"brokerDatas"`
	FilterServerTable map[string]json.RawMessage `json:"filterServerTable"`
}

type clusterInfo struct {
	BrokerAddrTable  map[string]brokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

func (id BrokerIdentity) brokerData() brokerData {
	addrs := map[string]string{"0": id.MasterAddr}
	if id.SlaveAddr != "" {
		addrs["1"] = id.SlaveAddr
	}
	return brokerData{Cluster: id.Cluster, BrokerName: id.Name, BrokerAddrs: addrs}
}

func (n *NameServer) handleRoute(req *Request) *Command {
	topic := req.Cmd.Ext("topic")
	t, ok, err := ensureTopic(n.src, topic, n.cfg.AutoCreateTopics, n.cfg.DefaultQueueNums)
	if err != nil {
		n.log.Warn("remoting: route lookup could not create topic", "topic", topic, "err", err)
		return NewResponse(req.Cmd, SystemError, err.Error())
	}
	if !ok {
		return NewResponse(req.Cmd, TopicNotExist, "No topic route info in name server for the topic: "+topic)
	}
	id := n.src.Identity().withDefaults()
	perm := t.Perm
	if perm == 0 {
		perm = meta.PermRead | meta.PermWrite
	}
	route := topicRouteData{
		QueueDatas: []queueData{{
			BrokerName:     id.Name,
			ReadQueueNums:  max(t.ReadQueueNums, 1),
			WriteQueueNums: max(t.WriteQueueNums, 1),
			Perm:           perm,
			TopicSysFlag:   t.TopicSysFlag,
		}},
		BrokerDatas:       []brokerData{id.brokerData()},
		FilterServerTable: map[string]json.RawMessage{},
	}
	resp := NewResponse(req.Cmd, Success, "")
	resp.Body = compactJSON(route)
	return resp
}

func (n *NameServer) handleClusterInfo(req *Request) *Command {
	id := n.src.Identity().withDefaults()
	ci := clusterInfo{
		BrokerAddrTable:  map[string]brokerData{id.Name: id.brokerData()},
		ClusterAddrTable: map[string][]string{id.Cluster: {id.Name}},
	}
	resp := NewResponse(req.Cmd, Success, "")
	resp.Body = compactJSON(ci)
	return resp
}

// topicList is GET_ALL_TOPIC_LIST_FROM_NAMESERVER's body (RocketMQ's
// TopicList; brokerAddr is null there, so left out). rocketmq-client-go
// decodes it with encoding/json.
type topicList struct {
	TopicList []string `json:"topicList"`
}

// handleTopicList is GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): every topic
// with a route, sorted, retry and dead-letter topics included as RocketMQ
// lists them.
func (n *NameServer) handleTopicList(req *Request) *Command {
	s := n.src.TopicSnapshot()
	names := make([]string, 0, len(s.Topics))
	for name := range s.Topics {
		names = append(names, name)
	}
	slices.Sort(names)
	resp := NewResponse(req.Cmd, Success, "")
	resp.Body = compactJSON(topicList{names})
	return resp
}

// handleDeleteTopic is DELETE_TOPIC_IN_NAMESRV (216): header topic
// (required) and clusterName. A keel name server's routes are its
// broker's own topic table, so a topic's route is gone as soon as
// DELETE_TOPIC_IN_BROKER removed the topic (RocketMQ's admin tools send
// that first); this answer changes nothing. It cannot hide a topic its
// broker still has, any more than RocketMQ can for longer than the
// broker's next registration.
func (n *NameServer) handleDeleteTopic(req *Request) *Command {
	e := &extReader{cmd: req.Cmd}
	topic := e.required("topic")
	if e.err != nil {
		return NewResponse(req.Cmd, SystemError, "decoding DELETE_TOPIC_IN_NAMESRV header: "+e.err.Error())
	}
	if _, ok := n.src.Topic(topic); ok {
		n.log.Info("remoting: DELETE_TOPIC_IN_NAMESRV for a topic its broker still has; its route stays", "topic", topic)
	}
	return NewResponse(req.Cmd, Success, "")
}
