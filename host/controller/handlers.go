package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/keelmq/keel/host/remoting"
)

// Register installs the controller's handlers on rs: BROKER_HEARTBEAT
// (904) and CONTROLLER_* 1001–1006, and REQUEST_CODE_NOT_SUPPORTED
// naming what keel does instead for 1008 and 1011–1013 (unsupported.go).
// Call it before rs serves. Every code
// but CONTROLLER_GET_METADATA_INFO is served by the leader only; a
// follower (or a leader not yet caught up) answers CONTROLLER_NOT_LEADER
// with the leader's id and remoting address in controllerLeaderId and
// controllerLeaderAddress (empty while unknown). rs's closed connections
// are watched: the brokers whose heartbeats came on one count as dead at
// once, and their groups are scanned.
//
// BROKER_HEARTBEAT's SUCCESS answer is a keel extension: it carries the
// group's replica info as CONTROLLER_GET_REPLICA_INFO does (RocketMQ's is
// empty), so a broker learns of an election at its next heartbeat.
//
// REGISTER_BROKER identifies a member by the nodeId header when the broker
// sends one (a stable id the broker keeps in its data directory, so a
// broker whose disk was wiped comes back as a new member outside the
// SyncStateSet), else by brokerAddress. The same identity always gets the
// same broker id.
func (c *Controller) Register(rs *remoting.Server) {
	rs.Handle(remoting.CodeBrokerHeartbeat, c.leaderOnly(c.handleHeartbeat))
	rs.Handle(remoting.CodeControllerRegisterBroker, c.leaderOnly(c.slow(c.handleRegister)))
	rs.Handle(remoting.CodeControllerElectMaster, c.leaderOnly(c.slow(c.handleElect)))
	rs.Handle(remoting.CodeControllerAlterSyncStateSet, c.leaderOnly(c.slow(c.handleAlter)))
	rs.Handle(remoting.CodeControllerGetReplicaInfo, c.leaderOnly(c.handleReplicaInfo))
	rs.Handle(remoting.CodeControllerGetSyncStateData, c.leaderOnly(c.handleSyncStateData))
	rs.Handle(remoting.CodeControllerGetMetadataInfo, c.handleMetadata)
	registerUnsupported(rs) // 1008, 1011-1013: REQUEST_CODE_NOT_SUPPORTED naming what keel does instead
	rs.OnConnClose(func(conn *remoting.Conn) {
		if c.live.connClosed(conn.ID()) {
			c.kickScan()
		}
	})
}

type handler func(req *remoting.Request) (*remoting.Command, error)

// leaderOnly answers CONTROLLER_NOT_LEADER unless this node leads, and
// turns h's error into its response code.
func (c *Controller) leaderOnly(h handler) remoting.Handler {
	return func(req *remoting.Request) *remoting.Command {
		if !c.IsLeader() {
			return c.notLeader(req.Cmd)
		}
		resp, err := h(req)
		return c.answer(req.Cmd, resp, err)
	}
}

// slow runs h on its own goroutine: it waits for a raft commit, which must
// not hold the connection's read loop.
func (c *Controller) slow(h handler) handler {
	return func(req *remoting.Request) (*remoting.Command, error) {
		req.Go(func(context.Context) *remoting.Command {
			resp, err := h(req)
			return c.answer(req.Cmd, resp, err)
		})
		return nil, nil
	}
}

func (c *Controller) answer(cmd *remoting.Command, resp *remoting.Command, err error) *remoting.Command {
	if err != nil {
		if codeOf(err) == remoting.ControllerNotLeader {
			return c.notLeader(cmd)
		}
		return remoting.NewResponse(cmd, codeOf(err), err.Error())
	}
	return resp
}

func (c *Controller) notLeader(cmd *remoting.Command) *remoting.Command {
	id, addr := c.Leader()
	remark := "this controller is not the leader; no leader is known"
	if addr != "" {
		remark = "this controller is not the leader; the leader is " + id + " at " + addr
	}
	resp := remoting.NewResponse(cmd, remoting.ControllerNotLeader, remark)
	resp.SetExt(hdrControllerLeaderID, id)
	resp.SetExt(hdrControllerLeaderAddress, addr)
	return resp
}

// lookup finds the group of brokerName (in clusterName when given).
func (c *Controller) lookup(cluster, name string) (Group, error) {
	if cluster != "" {
		if g, ok := c.Group(GroupKey{cluster, name}); ok {
			return g, nil
		}
		return Group{}, fmt.Errorf("%w: no broker group %s in cluster %s", ErrInvalidRequest, name, cluster)
	}
	var gs []Group
	c.fsm.read(func(s *replicated) { gs = s.byBrokerName(name) })
	switch len(gs) {
	case 0:
		return Group{}, fmt.Errorf("%w: no broker group %s", ErrInvalidRequest, name)
	case 1:
		return gs[0], nil
	}
	return Group{}, fmt.Errorf("%w: broker group %s exists in %d clusters; name the clusterName", ErrInvalidRequest, name, len(gs))
}

func (c *Controller) handleHeartbeat(req *remoting.Request) (*remoting.Command, error) {
	h := header{cmd: req.Cmd}
	k := GroupKey{h.required(hdrClusterName), h.required(hdrBrokerName)}
	hb := Heartbeat{
		Group:         k,
		BrokerID:      h.int(hdrBrokerID, 64, 0),
		Addr:          h.str(hdrBrokerAddr),
		Epoch:         int32(h.int(hdrEpoch, 32, 0)),
		MaxOffset:     h.int(hdrMaxOffset, 64, 0),
		ConfirmOffset: h.int(hdrConfirmOffset, 64, 0),
		Timeout:       time.Duration(h.int(hdrHeartbeatTimeoutMills, 64, 0)) * time.Millisecond,
		Priority:      int32(h.int(hdrElectionPriority, 32, 0)),
	}
	if h.err != nil {
		return nil, fmt.Errorf("BROKER_HEARTBEAT: %w", h.err)
	}
	g, ok := c.Group(k)
	if !ok {
		return nil, fmt.Errorf("BROKER_HEARTBEAT: %w: group %s is not registered", ErrNeedRegister, k)
	}
	if _, ok := g.Member(hb.BrokerID); !ok {
		return nil, fmt.Errorf("BROKER_HEARTBEAT: %w: broker id %d is not a member of %s", ErrNeedRegister, hb.BrokerID, k)
	}
	c.live.record(hb, req.Conn.ID(), time.Now())
	return replicaResponse(req.Cmd, &g), nil
}

func (c *Controller) handleRegister(req *remoting.Request) (*remoting.Command, error) {
	h := header{cmd: req.Cmd}
	r := registerCmd{
		Group:  GroupKey{h.required(hdrClusterName), h.required(hdrBrokerName)},
		Addr:   h.required(hdrBrokerAddress),
		HAAddr: h.str(hdrHAAddress),
		NodeID: h.str(hdrNodeID),
	}
	if h.err != nil {
		return nil, fmt.Errorf("CONTROLLER_REGISTER_BROKER: %w", h.err)
	}
	res, err := c.apply(command{Type: cmdRegister, Register: &r})
	if err != nil {
		return nil, fmt.Errorf("CONTROLLER_REGISTER_BROKER %s %s: %w", r.Group, r.Addr, err)
	}
	c.live.seedOne(r.Group, res.BrokerID, time.Now())
	resp := replicaResponse(req.Cmd, &res.Group)
	resp.SetExt(hdrClusterName, r.Group.Cluster)
	resp.SetExt(hdrBrokerName, r.Group.BrokerName)
	resp.SetExt(hdrBrokerID, i64s(res.BrokerID))
	return resp, nil
}

func (c *Controller) handleElect(req *remoting.Request) (*remoting.Command, error) {
	h := header{cmd: req.Cmd}
	cluster, name := h.str(hdrClusterName), h.required(hdrBrokerName)
	id := h.int(hdrBrokerID, 64, 0)
	designate := h.bool(hdrDesignateElect)
	if designate && id <= 0 && h.err == nil {
		h.err = fmt.Errorf("%w: designateElect needs a brokerId", ErrInvalidRequest)
	}
	if h.err != nil {
		return nil, fmt.Errorf("CONTROLLER_ELECT_MASTER: %w", h.err)
	}
	g, err := c.lookup(cluster, name)
	if err != nil {
		return nil, fmt.Errorf("CONTROLLER_ELECT_MASTER: %w", err)
	}
	res, err := c.electOnRequest(&g, id, designate)
	if err != nil {
		return nil, fmt.Errorf("CONTROLLER_ELECT_MASTER %s: %w", g.GroupKey, err)
	}
	return replicaResponse(req.Cmd, &res), nil
}

// electOnRequest is an election asked for over the wire: of the
// designated broker (admin), which must be alive and, unless unclean
// elections are allowed, in the SyncStateSet; or by the election policy
// when the master is not alive.
func (c *Controller) electOnRequest(g *Group, id int64, designate bool) (Group, error) {
	now := time.Now()
	alive := c.live.alive(g.GroupKey, now, c.cfg.HeartbeatTimeout, g.MasterID)
	e := electCmd{Group: g.GroupKey, ExpectEpoch: g.MasterEpoch}
	if designate {
		if _, ok := alive[id]; !ok {
			return Group{}, fmt.Errorf("%w: broker %d has no live heartbeat", ErrBrokerNotAlive, id)
		}
		e.NewMaster, e.Unclean = id, c.cfg.ElectUnclean
	} else {
		ch := choose(g, alive, c.cfg.ElectUnclean)
		switch ch.decision {
		case keep:
			if g.MasterID != 0 {
				return Group{}, fmt.Errorf("%w: broker %d is master at epoch %d", ErrMasterStillExist, g.MasterID, g.MasterEpoch)
			}
			return Group{}, fmt.Errorf("%w: no live member of the SyncStateSet %v", ErrElectMasterFailed, g.SyncStateSet)
		case wait:
			return Group{}, fmt.Errorf("%w: candidates have not reported their positions to this leader yet; retry", ErrElectMasterFailed)
		case noCandidate:
			return Group{}, fmt.Errorf("%w: no live member of the SyncStateSet %v (the leader's scan clears the master)", ErrElectMasterFailed, g.SyncStateSet)
		}
		e.NewMaster, e.Unclean = ch.id, ch.unclean
	}
	start := time.Now()
	res, err := c.apply(command{Type: cmdElect, Elect: &e})
	if err != nil {
		return Group{}, err
	}
	c.met.elected(time.Since(start))
	c.log.Info("elected a new master on request", hdrGroup, g.GroupKey, "master", e.NewMaster, hdrMasterEpoch, res.Group.MasterEpoch, "designated", designate)
	return res.Group, nil
}

func (c *Controller) handleAlter(req *remoting.Request) (*remoting.Command, error) {
	h := header{cmd: req.Cmd}
	cluster, name := h.str(hdrClusterName), h.required(hdrBrokerName)
	masterID := h.int(hdrMasterBrokerID, 64, 0)
	masterEpoch := int32(h.int(hdrMasterEpoch, 32, 0))
	if h.err != nil {
		return nil, fmt.Errorf("CONTROLLER_ALTER_SYNC_STATE_SET: %w", h.err)
	}
	var body syncStateSetBody
	if err := json.Unmarshal(req.Cmd.Body, &body); err != nil {
		return nil, fmt.Errorf("CONTROLLER_ALTER_SYNC_STATE_SET: %w: body is not a SyncStateSet: %v", ErrInvalidRequest, err)
	}
	g, err := c.lookup(cluster, name)
	if err != nil {
		return nil, fmt.Errorf("CONTROLLER_ALTER_SYNC_STATE_SET: %w", err)
	}
	res, err := c.apply(command{Type: cmdAlter, Alter: &alterCmd{
		Group: g.GroupKey, MasterID: masterID, MasterEpoch: masterEpoch,
		SetEpoch: body.SyncStateSetEpoch, Set: body.SyncStateSet,
	}})
	if err != nil {
		return nil, fmt.Errorf("CONTROLLER_ALTER_SYNC_STATE_SET %s: %w", g.GroupKey, err)
	}
	resp := remoting.NewResponse(req.Cmd, remoting.Success, "")
	resp.SetExt(hdrNewSyncStateSetEpoch, strconv.Itoa(int(res.Group.SyncStateSetEpoch)))
	resp.Body = mustJSON(syncStateSetBody{SyncStateSet: res.Group.SyncStateSet, SyncStateSetEpoch: res.Group.SyncStateSetEpoch})
	return resp, nil
}

func (c *Controller) handleReplicaInfo(req *remoting.Request) (*remoting.Command, error) {
	h := header{cmd: req.Cmd}
	cluster, name := h.str(hdrClusterName), h.required(hdrBrokerName)
	if h.err != nil {
		return nil, fmt.Errorf("CONTROLLER_GET_REPLICA_INFO: %w", h.err)
	}
	g, err := c.lookup(cluster, name)
	if err != nil {
		return nil, fmt.Errorf("CONTROLLER_GET_REPLICA_INFO: %w", err)
	}
	return replicaResponse(req.Cmd, &g), nil
}

// replicaResponse is the SUCCESS answer carrying a group's master in the
// header (masterBrokerId, masterAddress, masterEpoch, syncStateSetEpoch,
// masterHaAddress) and its SyncStateSet and members in the body.
func replicaResponse(cmd *remoting.Command, g *Group) *remoting.Command {
	resp := remoting.NewResponse(cmd, remoting.Success, "")
	m, _ := g.Master()
	resp.SetExt(hdrMasterBrokerID, i64s(g.MasterID))
	resp.SetExt(hdrMasterAddress, m.Addr)
	resp.SetExt(hdrMasterHAAddress, m.HAAddr)
	resp.SetExt(hdrMasterEpoch, strconv.Itoa(int(g.MasterEpoch)))
	resp.SetExt(hdrSyncStateSetEpoch, strconv.Itoa(int(g.SyncStateSetEpoch)))
	resp.Body = mustJSON(syncStateSetBody{SyncStateSet: g.SyncStateSet, SyncStateSetEpoch: g.SyncStateSetEpoch, Members: g.Members})
	return resp
}

// replicaIdentity and replicasInfo are RocketMQ's BrokerReplicasInfo
// shapes (CONTROLLER_GET_SYNC_STATE_DATA).
type replicaIdentity struct {
	BrokerName    string `json:"brokerName"`
	BrokerID      int64  `json:"brokerId"`
	BrokerAddress string `json:"brokerAddress"`
	Alive         bool   `json:"alive"`
}

type replicasInfo struct {
	MasterBrokerID    int64             `json:"masterBrokerId"`
	MasterAddress     string            `json:"masterAddress"`
	MasterEpoch       int32             `json:"masterEpoch"`
	SyncStateSetEpoch int32             `json:"syncStateSetEpoch"`
	InSyncReplicas    []replicaIdentity `json:"inSyncReplicas"`
	NotInSyncReplicas []replicaIdentity `json:"notInSyncReplicas"`
}

type brokerReplicasInfo struct {
	ReplicasInfoTable map[string]replicasInfo `json:"replicasInfoTable"`
}

func (c *Controller) handleSyncStateData(req *remoting.Request) (*remoting.Command, error) {
	var names []string
	if err := json.Unmarshal(req.Cmd.Body, &names); err != nil {
		return nil, fmt.Errorf("CONTROLLER_GET_SYNC_STATE_DATA: %w: body is not a JSON list of broker names: %v", ErrInvalidRequest, err)
	}
	cluster := req.Cmd.Ext(hdrClusterName)
	out := brokerReplicasInfo{ReplicasInfoTable: map[string]replicasInfo{}}
	now := time.Now()
	for _, name := range names {
		g, err := c.lookup(cluster, name)
		if err != nil {
			return nil, fmt.Errorf("CONTROLLER_GET_SYNC_STATE_DATA: %w", err)
		}
		alive := c.live.alive(g.GroupKey, now, c.cfg.HeartbeatTimeout, g.MasterID)
		m, _ := g.Master()
		ri := replicasInfo{MasterBrokerID: g.MasterID, MasterAddress: m.Addr, MasterEpoch: g.MasterEpoch, SyncStateSetEpoch: g.SyncStateSetEpoch,
			InSyncReplicas: []replicaIdentity{}, NotInSyncReplicas: []replicaIdentity{}}
		for _, mem := range g.Members {
			_, ok := alive[mem.ID]
			id := replicaIdentity{BrokerName: g.BrokerName, BrokerID: mem.ID, BrokerAddress: mem.Addr, Alive: ok}
			if g.InSyncStateSet(mem.ID) {
				ri.InSyncReplicas = append(ri.InSyncReplicas, id)
			} else {
				ri.NotInSyncReplicas = append(ri.NotInSyncReplicas, id)
			}
		}
		out.ReplicasInfoTable[name] = ri
	}
	resp := remoting.NewResponse(req.Cmd, remoting.Success, "")
	resp.Body = mustJSON(out)
	return resp, nil
}

// handleMetadata answers on every node: the leader's id and address,
// whether this node leads, and the raft peers ("id-addr;id-addr").
func (c *Controller) handleMetadata(req *remoting.Request) *remoting.Command {
	id, addr := c.Leader()
	resp := remoting.NewResponse(req.Cmd, remoting.Success, "")
	resp.SetExt(hdrGroup, controllerGroupName)
	resp.SetExt(hdrControllerLeaderID, id)
	resp.SetExt(hdrControllerLeaderAddress, addr)
	resp.SetExt(hdrIsLeader, strconv.FormatBool(c.IsLeader()))
	resp.SetExt(hdrPeers, c.peers())
	return resp
}

// peers lists the raft configuration as "id-addr;id-addr".
func (c *Controller) peers() string {
	r := c.raft.Load()
	if r == nil {
		return ""
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	var parts []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			parts = append(parts, string(s.ID)+"-"+string(s.Address))
		}
	}
	return strings.Join(parts, ";")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("controller: encoding %T: %v", v, err)) // plain structs of ints and strings
	}
	return b
}
