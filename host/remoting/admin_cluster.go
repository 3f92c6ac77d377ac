package remoting

import (
	"encoding/json"
	"fmt"
)

// ClusterInfo is GET_BROKER_CLUSTER_INFO's body (RocketMQ's ClusterInfo)
// as keel admin reads it from any name server.
type ClusterInfo struct {
	// BrokerAddrTable maps a broker name to its addresses by broker id
	// (0 the master).
	BrokerAddrTable map[string]ClusterBroker `json:"brokerAddrTable"`
	// ClusterAddrTable maps a cluster name to its broker names.
	ClusterAddrTable map[string][]string `json:"clusterAddrTable"`
}

// ClusterBroker is one broker group of a ClusterInfo (RocketMQ's
// BrokerData).
type ClusterBroker struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
}

// DecodeClusterInfo reads a GET_BROKER_CLUSTER_INFO body: standard JSON,
// or fastjson's form whose brokerAddrs keys are bare integers
// ({0:"host:port"}), which RocketMQ's name server writes.
func DecodeClusterInfo(body []byte) (ClusterInfo, error) {
	var ci ClusterInfo
	if err := json.Unmarshal(quoteIntKeys(body), &ci); err != nil {
		return ClusterInfo{}, fmt.Errorf("decoding cluster info: %w", err)
	}
	return ci, nil
}

// quoteIntKeys returns body with every object key written as a bare
// integer (fastjson's Map<Integer,X>, Map<Long,X>) quoted, so that
// encoding/json reads it; strings and everything else are copied as they
// are. body itself is not changed.
func quoteIntKeys(body []byte) []byte {
	out := make([]byte, 0, len(body)+16)
	inStr, keyPos := false, false // keyPos: an object key may start here
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inStr {
			out = append(out, c)
			if c == '\\' && i+1 < len(body) {
				i++
				out = append(out, body[i])
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr, keyPos = true, false
		case c == '{' || c == ',':
			keyPos = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case keyPos && (c == '-' || c >= '0' && c <= '9'):
			j := i + 1
			for j < len(body) && body[j] >= '0' && body[j] <= '9' {
				j++
			}
			k := skipSpace(body, j)
			if k < len(body) && body[k] == ':' {
				out = append(out, '"')
				out = append(out, body[i:j]...)
				out = append(out, '"')
				i = j - 1
				keyPos = false
				continue
			}
			keyPos = false
		default:
			keyPos = false
		}
		out = append(out, c)
	}
	return out
}
