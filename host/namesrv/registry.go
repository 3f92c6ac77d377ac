package namesrv

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/keelmq/keel/core/meta"
)

// brokerKey identifies a live broker, as RocketMQ's BrokerAddrInfo does.
type brokerKey struct{ cluster, addr string }

// liveBroker is one registered broker: its place in a group and what its
// last registration said.
type liveBroker struct {
	key     brokerKey
	name    string
	id      int64
	haAddr  string
	version meta.DataVersion
	topics  map[string]meta.TopicConfig
	filters []string
	// updated is the time of the last registration (or QUERY_DATA_VERSION);
	// the broker is dropped timeout after it.
	updated time.Time
	timeout time.Duration
	// conn is the remoting connection the last registration came on, 0 for
	// an in-process one; the broker is dropped when that connection closes.
	conn uint64
}

// group is one broker group (RocketMQ's BrokerData): every member's
// address by broker id.
type group struct {
	cluster string
	name    string
	addrs   map[int64]string
}

// registry is the name server's whole state. It is not safe for
// concurrent use; Server guards it.
//
// Invariants: every live broker is group name's member at its id, with
// the group's cluster; every member of a group is a live broker; a group
// has at least one member, and its name is in its cluster's set; a cluster
// set is never empty.
type registry struct {
	clusters map[string]map[string]struct{} // cluster → broker names
	groups   map[string]*group              // broker name → group
	brokers  map[brokerKey]*liveBroker
}

func newRegistry() *registry {
	return &registry{
		clusters: map[string]map[string]struct{}{},
		groups:   map[string]*group{},
		brokers:  map[brokerKey]*liveBroker{},
	}
}

// register applies reg (already validated), received at now on conn, and
// returns the answer and the brokers it displaced (for logging). Rules, as
// RocketMQ's RouteInfoManager.registerBroker:
//   - a broker name belongs to the cluster it was first registered in
//     while it has members; another cluster's registration of it is an
//     error;
//   - an address re-registering under a new id or name leaves its old
//     place (a slave promoted to id 0);
//   - a registration for an id another live address holds, whose topic
//     table's stateVersion is lower than that address's, is refused as
//     stale; otherwise the other address is displaced and forgotten;
//   - topics are replaced wholesale by the registration's.
func (r *registry) register(reg Registration, now time.Time, defTimeout time.Duration, conn uint64) (RegisterResult, []brokerKey, error) {
	key := brokerKey{reg.Cluster, reg.BrokerAddr}
	g := r.groups[reg.BrokerName]
	if g != nil && g.cluster != reg.Cluster {
		return RegisterResult{}, nil, fmt.Errorf("%w: broker name %q belongs to cluster %q, not %q", ErrInvalid, reg.BrokerName, g.cluster, reg.Cluster)
	}
	var displaced []brokerKey
	if g != nil {
		if holder, ok := g.addrs[reg.BrokerID]; ok && holder != reg.BrokerAddr {
			hk := brokerKey{g.cluster, holder}
			if old := r.brokers[hk]; old != nil && old.version.StateVersion > reg.DataVersion.StateVersion {
				return RegisterResult{}, nil, fmt.Errorf("%w: stale registration of %s as %s id %d: its stateVersion %d is below %d of %s, which holds that id",
					ErrInvalid, reg.BrokerAddr, reg.BrokerName, reg.BrokerID, reg.DataVersion.StateVersion, old.version.StateVersion, holder)
			}
			r.remove(hk)
			displaced = append(displaced, hk)
		}
	}
	if old := r.brokers[key]; old != nil && (old.name != reg.BrokerName || old.id != reg.BrokerID) {
		r.remove(key)
	}
	g = r.groups[reg.BrokerName] // remove may have dropped it
	if g == nil {
		g = &group{cluster: reg.Cluster, name: reg.BrokerName, addrs: map[int64]string{}}
		r.groups[reg.BrokerName] = g
		names := r.clusters[reg.Cluster]
		if names == nil {
			names = map[string]struct{}{}
			r.clusters[reg.Cluster] = names
		}
		names[reg.BrokerName] = struct{}{}
	}
	g.addrs[reg.BrokerID] = reg.BrokerAddr
	timeout := reg.HeartbeatTimeout
	if timeout <= 0 {
		timeout = defTimeout
	}
	r.brokers[key] = &liveBroker{
		key: key, name: reg.BrokerName, id: reg.BrokerID, haAddr: reg.HAServerAddr,
		version: reg.DataVersion, topics: maps.Clone(reg.Topics), filters: slices.Clone(reg.FilterServers),
		updated: now, timeout: timeout, conn: conn,
	}
	var res RegisterResult
	if reg.BrokerID != MasterID {
		if m, ok := g.addrs[MasterID]; ok {
			res.MasterAddr = m
			if lb := r.brokers[brokerKey{g.cluster, m}]; lb != nil {
				res.HAServerAddr = lb.haAddr
			}
		}
	}
	return res, displaced, nil
}

// unregister removes the broker at (cluster, addr) if it is name's member
// at id, and reports whether it did.
func (r *registry) unregister(cluster, name, addr string, id int64) bool {
	key := brokerKey{cluster, addr}
	lb := r.brokers[key]
	if lb == nil || lb.name != name || lb.id != id {
		return false
	}
	r.remove(key)
	return true
}

// remove forgets a live broker and its group membership.
func (r *registry) remove(key brokerKey) {
	lb := r.brokers[key]
	if lb == nil {
		return
	}
	delete(r.brokers, key)
	g := r.groups[lb.name]
	if g == nil || g.addrs[lb.id] != key.addr {
		return
	}
	delete(g.addrs, lb.id)
	if len(g.addrs) > 0 {
		return
	}
	delete(r.groups, lb.name)
	names := r.clusters[g.cluster]
	delete(names, lb.name)
	if len(names) == 0 {
		delete(r.clusters, g.cluster)
	}
}

// removeWhere forgets every live broker for which drop is true and
// returns them.
func (r *registry) removeWhere(drop func(*liveBroker) bool) []*liveBroker {
	var gone []*liveBroker
	for key, lb := range r.brokers {
		if drop(lb) {
			r.remove(key)
			gone = append(gone, lb)
		}
	}
	return gone
}

// source returns the member whose topics the group's routes show: the
// master, or the smallest id (the prime slave) when there is none.
func (r *registry) source(g *group) *liveBroker {
	id := slices.Min(slices.Collect(maps.Keys(g.addrs)))
	return r.brokers[brokerKey{g.cluster, g.addrs[id]}]
}

// deleteTopic removes topic from every broker's table (only those of
// cluster when it is not empty) until their next registration, and reports
// whether any held it.
func (r *registry) deleteTopic(topic, cluster string) bool {
	found := false
	for key, lb := range r.brokers {
		if cluster != "" && key.cluster != cluster {
			continue
		}
		if _, ok := lb.topics[topic]; ok {
			delete(lb.topics, topic)
			found = true
		}
	}
	return found
}

// sortedGroups returns the groups ordered by broker name.
func (r *registry) sortedGroups() []*group {
	gs := slices.Collect(maps.Values(r.groups))
	slices.SortFunc(gs, func(a, b *group) int { return cmp.Compare(a.name, b.name) })
	return gs
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
