package controller

import (
	"encoding/json"
	"fmt"
	"slices"
)

// commandVersion is the version of the command encoding. An entry of
// another version is refused by apply (with an error result, the same on
// every node), never guessed at.
const commandVersion = 1

// Command types: one per state change.
const (
	cmdRegister = "register"
	cmdElect    = "elect"
	cmdAlter    = "alter"
	cmdAnnounce = "announce"
)

// command is one raft log entry, JSON-encoded. Exactly the field named by
// Type is set.
type command struct {
	V        int          `json:"v"`
	Type     string       `json:"type"`
	Register *registerCmd `json:"register,omitempty"`
	Elect    *electCmd    `json:"elect,omitempty"`
	Alter    *alterCmd    `json:"alter,omitempty"`
	Announce *announceCmd `json:"announce,omitempty"`
}

// registerCmd adds a member to a group (creating the group) or updates
// the addresses of the member with the same identity (Member.identity).
type registerCmd struct {
	Group  GroupKey `json:"group"`
	Addr   string   `json:"addr"`
	HAAddr string   `json:"haAddr,omitempty"`
	NodeID string   `json:"nodeId,omitempty"`
}

// electCmd changes a group's master. The leader picks NewMaster from the
// heartbeats it holds; apply re-validates it against the state.
type electCmd struct {
	Group GroupKey `json:"group"`
	// ExpectEpoch is the master epoch the leader decided on; the command
	// is refused (ErrFencedMasterEpoch) if another change came first.
	ExpectEpoch int32 `json:"expectEpoch"`
	// NewMaster is the new master's id; 0 clears the master (the master
	// is gone and nobody can be elected), which also bumps the epoch so the
	// old master is fenced.
	NewMaster int64 `json:"newMaster"`
	// Unclean allows a NewMaster outside the SyncStateSet. The leader sets
	// it only when its configuration allows unclean elections; it lives in
	// the command, not in each node's configuration, so that every node
	// applies the entry alike.
	Unclean bool `json:"unclean,omitempty"`
}

// alterCmd replaces a group's SyncStateSet, asked by its master.
type alterCmd struct {
	Group       GroupKey `json:"group"`
	MasterID    int64    `json:"masterId"`
	MasterEpoch int32    `json:"masterEpoch"`
	SetEpoch    int32    `json:"setEpoch"`
	Set         []int64  `json:"set"`
}

// announceCmd records the remoting address of a controller that became
// leader, so that followers can name it in their redirects.
type announceCmd struct {
	ServerID     string `json:"serverId"`
	RemotingAddr string `json:"remotingAddr"`
}

// applyResult is what apply returns for one entry: the group after the
// change (for register, elect and alter), the registered broker id, or the
// reason the entry was refused (then the state is unchanged).
type applyResult struct {
	Group    Group
	BrokerID int64
	Err      error
}

func encodeCommand(c command) ([]byte, error) {
	c.V = commandVersion
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding controller command %s: %w", c.Type, err)
	}
	return b, nil
}

// applyEntry decodes and applies one log entry.
func (s *replicated) applyEntry(data []byte) applyResult {
	var c command
	if err := json.Unmarshal(data, &c); err != nil {
		return applyResult{Err: fmt.Errorf("decoding controller command: %w", err)}
	}
	return s.apply(c)
}

// apply applies c. It is pure: the result depends on s and c alone. A
// refused command leaves s unchanged.
func (s *replicated) apply(c command) applyResult {
	if c.V != commandVersion {
		return applyResult{Err: fmt.Errorf("%w: command version %d, this controller applies %d", ErrInvalidRequest, c.V, commandVersion)}
	}
	switch {
	case c.Type == cmdRegister && c.Register != nil:
		return s.register(*c.Register)
	case c.Type == cmdElect && c.Elect != nil:
		return s.elect(*c.Elect)
	case c.Type == cmdAlter && c.Alter != nil:
		return s.alter(*c.Alter)
	case c.Type == cmdAnnounce && c.Announce != nil:
		if c.Announce.ServerID == "" {
			return applyResult{Err: fmt.Errorf("%w: announce without a server id", ErrInvalidRequest)}
		}
		s.Controllers[c.Announce.ServerID] = c.Announce.RemotingAddr
		return applyResult{}
	}
	return applyResult{Err: fmt.Errorf("%w: command type %q without its body", ErrInvalidRequest, c.Type)}
}

func (s *replicated) register(r registerCmd) applyResult {
	if r.Group.Cluster == "" || r.Group.BrokerName == "" || r.Addr == "" {
		return applyResult{Err: fmt.Errorf("%w: register needs clusterName, brokerName and brokerAddress (got %q, %q, %q)", ErrInvalidRequest, r.Group.Cluster, r.Group.BrokerName, r.Addr)}
	}
	g, ok := s.Groups[r.Group]
	if !ok {
		g = &Group{GroupKey: r.Group, NextID: 1}
		s.Groups[r.Group] = g
	}
	nm := Member{Addr: r.Addr, HAAddr: r.HAAddr, NodeID: r.NodeID}
	for i := range g.Members {
		if g.Members[i].identity() == nm.identity() {
			g.Members[i].Addr, g.Members[i].HAAddr = r.Addr, r.HAAddr
			return applyResult{Group: g.clone(), BrokerID: g.Members[i].ID}
		}
	}
	nm.ID = g.NextID
	g.NextID++
	g.Members = append(g.Members, nm) // ids grow, so Members stays sorted
	return applyResult{Group: g.clone(), BrokerID: nm.ID}
}

func (s *replicated) elect(e electCmd) applyResult {
	g, ok := s.Groups[e.Group]
	if !ok {
		return applyResult{Err: fmt.Errorf("%w: elect in unknown group %s", ErrInvalidRequest, e.Group)}
	}
	if e.ExpectEpoch != g.MasterEpoch {
		return applyResult{Err: fmt.Errorf("%w: election decided at master epoch %d, group %s is at %d", ErrFencedMasterEpoch, e.ExpectEpoch, e.Group, g.MasterEpoch)}
	}
	if e.NewMaster == 0 {
		if g.MasterID == 0 {
			return applyResult{Err: fmt.Errorf("%w: group %s has no master to clear", ErrElectMasterFailed, e.Group)}
		}
		g.MasterID = 0
		g.MasterEpoch++
		return applyResult{Group: g.clone()}
	}
	if _, ok := g.Member(e.NewMaster); !ok {
		return applyResult{Err: fmt.Errorf("%w: broker %d is not a member of %s", ErrBrokerIDInvalid, e.NewMaster, e.Group)}
	}
	if e.NewMaster == g.MasterID {
		return applyResult{Err: fmt.Errorf("%w: broker %d is already master of %s", ErrMasterStillExist, e.NewMaster, e.Group)}
	}
	if !eligible(g, e.NewMaster) && !e.Unclean {
		return applyResult{Err: fmt.Errorf("%w: broker %d is not in the SyncStateSet %v of %s and the election is not unclean", ErrElectMasterFailed, e.NewMaster, g.SyncStateSet, e.Group)}
	}
	g.MasterID = e.NewMaster
	g.MasterEpoch++
	g.SyncStateSet = []int64{e.NewMaster}
	g.SyncStateSetEpoch++
	return applyResult{Group: g.clone()}
}

// eligible reports whether id may be elected cleanly: it is in the
// SyncStateSet, or the group never had a master (its first election,
// where every member is a candidate, as RocketMQ's first election).
func eligible(g *Group, id int64) bool {
	return g.MasterEpoch == 0 || g.InSyncStateSet(id)
}

func (s *replicated) alter(a alterCmd) applyResult {
	g, ok := s.Groups[a.Group]
	if !ok {
		return applyResult{Err: fmt.Errorf("%w: alter SyncStateSet of unknown group %s", ErrInvalidRequest, a.Group)}
	}
	if a.MasterEpoch != g.MasterEpoch {
		return applyResult{Err: fmt.Errorf("%w: alter from master epoch %d, group %s is at %d", ErrFencedMasterEpoch, a.MasterEpoch, a.Group, g.MasterEpoch)}
	}
	if g.MasterID == 0 || a.MasterID != g.MasterID {
		return applyResult{Err: fmt.Errorf("%w: broker %d asked, the master of %s is %d", ErrInvalidMaster, a.MasterID, a.Group, g.MasterID)}
	}
	if a.SetEpoch != g.SyncStateSetEpoch {
		return applyResult{Err: fmt.Errorf("%w: alter from SyncStateSet epoch %d, group %s is at %d", ErrFencedSyncStateSetEpoch, a.SetEpoch, a.Group, g.SyncStateSetEpoch)}
	}
	set := slices.Clone(a.Set)
	slices.Sort(set)
	if len(slices.Compact(slices.Clone(set))) != len(set) {
		return applyResult{Err: fmt.Errorf("%w: %v repeats a broker id", ErrInvalidReplicas, a.Set)}
	}
	for _, id := range set {
		if _, ok := g.Member(id); !ok {
			return applyResult{Err: fmt.Errorf("%w: broker %d is not a member of %s", ErrInvalidReplicas, id, a.Group)}
		}
	}
	if _, ok := slices.BinarySearch(set, g.MasterID); !ok {
		return applyResult{Err: fmt.Errorf("%w: %v leaves out the master %d", ErrInvalidReplicas, a.Set, g.MasterID)}
	}
	g.SyncStateSet = set
	g.SyncStateSetEpoch++
	return applyResult{Group: g.clone()}
}
