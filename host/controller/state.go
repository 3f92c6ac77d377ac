package controller

import (
	"fmt"
	"slices"
	"sort"
)

// GroupKey names a broker group: the cluster and the broker name. Every
// group's state is kept under its key; two clusters may hold groups of the
// same broker name.
type GroupKey struct {
	Cluster    string `json:"cluster"`
	BrokerName string `json:"brokerName"`
}

func (k GroupKey) String() string { return k.Cluster + "/" + k.BrokerName }

// Member is one broker of a group as the controller registered it.
type Member struct {
	// ID is the broker id the controller gave it, from 1 up, never reused
	// within the group.
	ID int64 `json:"id"`
	// Addr is the client-facing remoting address ("host:port").
	Addr string `json:"addr"`
	// HAAddr is the address its replicas connect to when it is master.
	HAAddr string `json:"haAddr,omitempty"`
	// NodeID is the broker-supplied stable identity, "" when the broker
	// gave none (see Register for what identifies a member).
	NodeID string `json:"nodeId,omitempty"`
}

// identity is what names a member across registrations: the broker's
// stable node id when it sent one, else its client-facing address.
func (m *Member) identity() string {
	if m.NodeID != "" {
		return "node:" + m.NodeID
	}
	return "addr:" + m.Addr
}

// Group is the replicated state of one broker group. Values handed out by
// the package are copies; changing them changes nothing.
type Group struct {
	GroupKey
	// Members are sorted by ID.
	Members []Member `json:"members"`
	// NextID is the id the next new member gets (1 for an empty group).
	NextID int64 `json:"nextId"`
	// MasterID is the master's broker id, 0 when the group has no master.
	MasterID int64 `json:"masterId"`
	// MasterEpoch counts master changes (an election, or the loss of the
	// master with nobody to elect); 0 means the group never had a master.
	// It only grows.
	MasterEpoch int32 `json:"masterEpoch"`
	// SyncStateSet holds the broker ids that hold every acknowledged
	// write, sorted; only they may be elected (see ElectMaster).
	SyncStateSet []int64 `json:"syncStateSet"`
	// SyncStateSetEpoch counts SyncStateSet changes; it only grows.
	SyncStateSetEpoch int32 `json:"syncStateSetEpoch"`
}

// Member returns the member with broker id id.
func (g *Group) Member(id int64) (Member, bool) {
	i, ok := slices.BinarySearchFunc(g.Members, id, func(m Member, id int64) int {
		switch {
		case m.ID < id:
			return -1
		case m.ID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return Member{}, false
	}
	return g.Members[i], true
}

// Master returns the master member; ok is false when there is none.
func (g *Group) Master() (Member, bool) {
	if g.MasterID == 0 {
		return Member{}, false
	}
	return g.Member(g.MasterID)
}

// InSyncStateSet reports whether id is in the SyncStateSet.
func (g *Group) InSyncStateSet(id int64) bool {
	_, ok := slices.BinarySearch(g.SyncStateSet, id)
	return ok
}

// validate checks the invariants every applied command keeps: members
// sorted by distinct ids below NextID, the SyncStateSet sorted, distinct
// and made of members, the master (if any) in it, epochs not negative.
func (g *Group) validate() error {
	if g.Cluster == "" || g.BrokerName == "" {
		return fmt.Errorf("group %s: empty cluster or broker name", g.GroupKey)
	}
	if g.MasterEpoch < 0 || g.SyncStateSetEpoch < 0 {
		return fmt.Errorf("group %s: negative epoch (%d, %d)", g.GroupKey, g.MasterEpoch, g.SyncStateSetEpoch)
	}
	for i, m := range g.Members {
		if m.ID < 1 || m.ID >= g.NextID || (i > 0 && m.ID <= g.Members[i-1].ID) {
			return fmt.Errorf("group %s: member ids %v not increasing from 1 below %d", g.GroupKey, memberIDs(g.Members), g.NextID)
		}
	}
	for i, id := range g.SyncStateSet {
		if _, ok := g.Member(id); !ok || (i > 0 && id <= g.SyncStateSet[i-1]) {
			return fmt.Errorf("group %s: SyncStateSet %v not sorted distinct members", g.GroupKey, g.SyncStateSet)
		}
	}
	if g.MasterID != 0 && !g.InSyncStateSet(g.MasterID) {
		return fmt.Errorf("group %s: master %d outside the SyncStateSet %v", g.GroupKey, g.MasterID, g.SyncStateSet)
	}
	return nil
}

func memberIDs(ms []Member) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func (g *Group) clone() Group {
	out := *g
	out.Members = slices.Clone(g.Members)
	out.SyncStateSet = slices.Clone(g.SyncStateSet)
	return out
}

// replicated is the controller's whole replicated state. It is changed only by
// apply, which is deterministic: the same commands in the same order give
// the same state on every node. It reads no clock and no configuration.
type replicated struct {
	// Groups by key.
	Groups map[GroupKey]*Group
	// Controllers maps a controller's raft server id to the remoting
	// address it announced when it last became leader.
	Controllers map[string]string
}

func newState() *replicated {
	return &replicated{Groups: map[GroupKey]*Group{}, Controllers: map[string]string{}}
}

// group returns a copy of the group under k.
func (s *replicated) group(k GroupKey) (Group, bool) {
	g, ok := s.Groups[k]
	if !ok {
		return Group{}, false
	}
	return g.clone(), true
}

// groups returns copies of every group, sorted by key.
func (s *replicated) groups() []Group {
	out := make([]Group, 0, len(s.Groups))
	for _, g := range s.Groups {
		out = append(out, g.clone())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].BrokerName < out[j].BrokerName
	})
	return out
}

// byBrokerName returns the groups named name, in every cluster.
func (s *replicated) byBrokerName(name string) []Group {
	var out []Group
	for _, g := range s.groups() {
		if g.BrokerName == name {
			out = append(out, g)
		}
	}
	return out
}

// snapshotState is the replicated state's encoded form: groups as a
// sorted list, since JSON object keys must be strings.
type snapshotState struct {
	Version     int               `json:"version"`
	Groups      []Group           `json:"groups"`
	Controllers map[string]string `json:"controllers"`
}

// snapshotVersion is the version of snapshotState written by Persist.
const snapshotVersion = 1

func (s *replicated) encodable() snapshotState {
	return snapshotState{Version: snapshotVersion, Groups: s.groups(), Controllers: s.Controllers}
}

func stateFrom(ss snapshotState) (*replicated, error) {
	if ss.Version != snapshotVersion {
		return nil, fmt.Errorf("controller snapshot version %d, want %d", ss.Version, snapshotVersion)
	}
	s := newState()
	for i := range ss.Groups {
		g := ss.Groups[i].clone()
		if err := g.validate(); err != nil {
			return nil, fmt.Errorf("controller snapshot: %w", err)
		}
		if _, dup := s.Groups[g.GroupKey]; dup {
			return nil, fmt.Errorf("controller snapshot holds group %s twice", g.GroupKey)
		}
		s.Groups[g.GroupKey] = &g
	}
	for id, addr := range ss.Controllers {
		s.Controllers[id] = addr
	}
	return s, nil
}
