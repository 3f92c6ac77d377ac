package namesrv

import (
	"encoding/json"
	"strconv"

	"github.com/keelmq/keel/core/meta"
)

// The bodies of GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO and
// GET_ALL_TOPIC_LIST_FROM_NAMESERVER, field for field and in the order
// rocketmq-client-go reads them (RocketMQ's TopicRouteData, QueueData,
// BrokerData, ClusterInfo and TopicList). brokerAddrs is written as a
// standard JSON object with quoted ids, which the Go client's hand parser
// and Java both accept.

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

// topicList is GET_ALL_TOPIC_LIST_FROM_NAMESERVER's body; brokerAddr is
// null there, so left out.
type topicList struct {
	TopicList []string `json:"topicList"`
}

func (g *group) brokerData() brokerData {
	addrs := make(map[string]string, len(g.addrs))
	for id, a := range g.addrs {
		addrs[strconv.FormatInt(id, 10)] = a
	}
	return brokerData{Cluster: g.cluster, BrokerName: g.name, BrokerAddrs: addrs}
}

// route returns topic's route: one queueData and one brokerData per group
// whose source lists the topic, ordered by broker name; a slave source's
// queues lose the write permission. ok is false when no group has it.
func (r *registry) route(topic string) (topicRouteData, bool) {
	rd := topicRouteData{QueueDatas: []queueData{}, BrokerDatas: []brokerData{}, FilterServerTable: map[string]json.RawMessage{}}
	for _, g := range r.sortedGroups() {
		src := r.source(g)
		tc, ok := src.topics[topic]
		if !ok {
			continue
		}
		perm := tc.Perm
		if src.id != MasterID {
			perm &^= meta.PermWrite
		}
		rd.QueueDatas = append(rd.QueueDatas, queueData{
			BrokerName: g.name, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
			Perm: perm, TopicSysFlag: tc.TopicSysFlag,
		})
		rd.BrokerDatas = append(rd.BrokerDatas, g.brokerData())
		for _, addr := range g.addrs {
			if lb := r.brokers[brokerKey{g.cluster, addr}]; lb != nil && len(lb.filters) > 0 {
				rd.FilterServerTable[addr] = mustJSON(lb.filters)
			}
		}
	}
	return rd, len(rd.QueueDatas) > 0
}

// clusterInfo returns every group and every cluster's broker names
// (sorted).
func (r *registry) clusterInfo() clusterInfo {
	ci := clusterInfo{BrokerAddrTable: map[string]brokerData{}, ClusterAddrTable: map[string][]string{}}
	for name, g := range r.groups {
		ci.BrokerAddrTable[name] = g.brokerData()
	}
	for cluster, names := range r.clusters {
		ci.ClusterAddrTable[cluster] = sortedKeys(names)
	}
	return ci
}

// topicList returns every topic some group's source lists, sorted.
func (r *registry) topicList() topicList {
	set := map[string]struct{}{}
	for _, g := range r.groups {
		for name := range r.source(g).topics {
			set[name] = struct{}{}
		}
	}
	return topicList{TopicList: sortedKeys(set)}
}
