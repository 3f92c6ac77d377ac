package namesrv

import (
	"cmp"
	"slices"
	"time"

	"github.com/keelmq/keel/core/meta"
)

// BrokerInfo describes one registered broker, for status pages and admin
// tools.
type BrokerInfo struct {
	Cluster      string
	BrokerName   string
	BrokerAddr   string
	BrokerID     int64
	HAServerAddr string
	DataVersion  meta.DataVersion
	// Topics is the number of topics its last registration listed.
	Topics int
	// LastUpdate is its last registration (or QUERY_DATA_VERSION); it is
	// dropped Timeout after it.
	LastUpdate time.Time
	Timeout    time.Duration
	// Wire reports whether it registered over a connection (dropped when
	// that closes) rather than in process.
	Wire bool
}

// Brokers returns every registered broker, ordered by cluster, broker
// name and broker id.
func (s *Server) Brokers() []BrokerInfo {
	s.mu.Lock()
	out := make([]BrokerInfo, 0, len(s.reg.brokers))
	for _, lb := range s.reg.brokers {
		out = append(out, BrokerInfo{
			Cluster: lb.key.cluster, BrokerName: lb.name, BrokerAddr: lb.key.addr, BrokerID: lb.id, HAServerAddr: lb.haAddr,
			DataVersion: lb.version, Topics: len(lb.topics), LastUpdate: lb.updated, Timeout: lb.timeout, Wire: lb.conn != 0,
		})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b BrokerInfo) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.BrokerID, b.BrokerID))
	})
	return out
}
