package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// clientRetryPause is how long a call waits before another round over the
// controller addresses when none of them led (an election in progress).
const clientRetryPause = 100 * time.Millisecond

// Client talks to a controller group for a broker or `keel admin`. It
// keeps one persistent connection per controller address and sends every
// call to the leader: it starts with the last leader it found, follows
// CONTROLLER_NOT_LEADER to the address the answer names, and tries the
// other addresses when one is down or names no leader, in rounds, until
// the call's timeout. Heartbeats therefore travel on one long-lived
// connection to the leader, whose closing (the broker's process died)
// makes the leader elect at once. Safe for concurrent use.
type Client struct {
	addrs   []string
	timeout time.Duration

	mu     sync.Mutex
	leader string
	// leaderConn is the connection of the last SUCCESS answer.
	leaderConn *clientConn
	conns      map[string]*clientConn
	closed     bool
}

// NewClient returns a client of the controllers at addrs (remoting
// addresses, "host:port"). timeout bounds each call, redirects and retries
// included; 0 means remoting.DefaultCallTimeout. It dials nothing yet.
func NewClient(addrs []string, timeout time.Duration) (*Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("controller client: no controller addresses")
	}
	for _, a := range addrs {
		if a == "" {
			return nil, fmt.Errorf("controller client: empty address in %q", addrs)
		}
	}
	if timeout <= 0 {
		timeout = remoting.DefaultCallTimeout
	}
	return &Client{addrs: slices.Clone(addrs), timeout: timeout, conns: map[string]*clientConn{}}, nil
}

// Close closes every connection. Calls after Close fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for a, cc := range c.conns {
		cc.close()
		delete(c.conns, a)
	}
	return nil
}

func (c *Client) conn(ctx context.Context, addr string) (*clientConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("controller client is closed")
	}
	if cc := c.conns[addr]; cc != nil && !cc.broken() {
		c.mu.Unlock()
		return cc, nil
	}
	c.mu.Unlock()
	cc, err := dialConn(ctx, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cc.close()
		return nil, errors.New("controller client is closed")
	}
	if old := c.conns[addr]; old != nil && !old.broken() {
		cc.close()
		return old, nil
	}
	c.conns[addr] = cc
	return cc, nil
}

// order returns the addresses to try: the known leader first.
func (c *Client) order() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.addrs)+1)
	if c.leader != "" {
		out = append(out, c.leader)
	}
	for _, a := range c.addrs {
		if a != c.leader {
			out = append(out, a)
		}
	}
	return out
}

func (c *Client) setLeader(addr string, cc *clientConn) {
	c.mu.Lock()
	c.leader, c.leaderConn = addr, cc
	c.mu.Unlock()
}

// leaderConnOpen reports whether the connection of the last SUCCESS
// answer is still open.
func (c *Client) leaderConnOpen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaderConn != nil && !c.leaderConn.broken()
}

// call sends cmd to the leader and returns its SUCCESS answer, or the
// controller's refusal as an error matching this package's sentinels.
func (c *Client) call(ctx context.Context, cmd remoting.Command) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var last error
	for {
		for _, addr := range c.order() {
			resp, err := c.callAt(ctx, addr, cmd)
			if err == nil {
				return resp, nil
			}
			last = err
			if ctx.Err() != nil {
				return nil, fmt.Errorf("controller call (code %d): %w (last: %v)", cmd.Code, ctx.Err(), last)
			}
			if !errors.Is(err, errConnBroken) && !errors.Is(err, ErrNotLeader) {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("controller call (code %d): no leader answered: %w", cmd.Code, last)
		case <-time.After(clientRetryPause):
		}
	}
}

// callAt calls addr and, if it answers CONTROLLER_NOT_LEADER naming a
// leader, that leader once.
func (c *Client) callAt(ctx context.Context, addr string, cmd remoting.Command) (*remoting.Command, error) {
	for hop := 0; hop < 2; hop++ {
		cc, err := c.conn(ctx, addr)
		if err != nil {
			return nil, err
		}
		resp, err := cc.invoke(ctx, cmd)
		if err != nil {
			return nil, err
		}
		if resp.Code == remoting.Success {
			c.setLeader(addr, cc)
			return resp, nil
		}
		err = errorOf(resp.Code, resp.Remark)
		if resp.Code != remoting.ControllerNotLeader {
			return nil, err
		}
		next := resp.Ext(hdrControllerLeaderAddress)
		if next == "" || next == addr {
			return nil, err
		}
		addr = next
	}
	return nil, fmt.Errorf("%w: redirected more than once", ErrNotLeader)
}

func request(code int16, fields map[string]string, body []byte) remoting.Command {
	return remoting.Command{Code: code, ExtFields: remoting.FieldsOf(fields), Body: body}
}

// Registration is what a broker tells the controller about itself.
type Registration struct {
	Group GroupKey
	// Addr is the client-facing address; HAAddr the replication address.
	Addr, HAAddr string
	// NodeID is the broker's stable identity (kept in its data directory);
	// "" identifies the broker by Addr. See Controller.Register.
	NodeID string
}

// Register registers the broker and returns its broker id and its
// group's state (Group.Members carries every member's addresses).
func (c *Client) Register(ctx context.Context, r Registration) (int64, Group, error) {
	resp, err := c.call(ctx, request(remoting.CodeControllerRegisterBroker, map[string]string{
		hdrClusterName: r.Group.Cluster, hdrBrokerName: r.Group.BrokerName, hdrBrokerAddress: r.Addr,
		hdrHAAddress: r.HAAddr, hdrNodeID: r.NodeID,
		hdrInvokeTime: strconv.FormatInt(time.Now().UnixMilli(), 10),
	}, nil))
	if err != nil {
		return 0, Group{}, fmt.Errorf("registering %s %s with the controller: %w", r.Group, r.Addr, err)
	}
	id, err := strconv.ParseInt(resp.Ext(hdrBrokerID), 10, 64)
	if err != nil {
		return 0, Group{}, fmt.Errorf("registering %s %s: answer without a broker id: %w", r.Group, r.Addr, err)
	}
	g, err := groupFromReply(r.Group, resp)
	if err != nil {
		return 0, Group{}, fmt.Errorf("registering %s %s: %w", r.Group, r.Addr, err)
	}
	return id, g, nil
}

// Heartbeat reports the broker's liveness and position to the leader and
// returns its group's state as the leader holds it (master, epochs,
// SyncStateSet, members), so the broker can switch roles on an election.
func (c *Client) Heartbeat(ctx context.Context, hb Heartbeat) (Group, error) {
	resp, err := c.call(ctx, request(remoting.CodeBrokerHeartbeat, map[string]string{
		hdrClusterName: hb.Group.Cluster, hdrBrokerName: hb.Group.BrokerName, hdrBrokerAddr: hb.Addr,
		hdrBrokerID: i64s(hb.BrokerID), hdrEpoch: strconv.Itoa(int(hb.Epoch)),
		hdrMaxOffset: i64s(hb.MaxOffset), hdrConfirmOffset: i64s(hb.ConfirmOffset),
		hdrHeartbeatTimeoutMills: i64s(hb.Timeout.Milliseconds()), hdrElectionPriority: strconv.Itoa(int(hb.Priority)),
	}, nil))
	if err != nil {
		return Group{}, fmt.Errorf("heartbeat of %s broker %d: %w", hb.Group, hb.BrokerID, err)
	}
	return groupFromReply(hb.Group, resp)
}

// AlterSyncStateSet asks, as master masterID at masterEpoch, to replace
// the group's SyncStateSet (currently at setEpoch) with set. It returns
// the new set epoch; a stale master gets an error matching
// ErrFencedMasterEpoch.
func (c *Client) AlterSyncStateSet(ctx context.Context, k GroupKey, masterID int64, masterEpoch int32, set []int64, setEpoch int32) (int32, error) {
	body := mustJSON(syncStateSetBody{SyncStateSet: set, SyncStateSetEpoch: setEpoch})
	resp, err := c.call(ctx, request(remoting.CodeControllerAlterSyncStateSet, map[string]string{
		hdrClusterName: k.Cluster, hdrBrokerName: k.BrokerName, hdrMasterBrokerID: i64s(masterID),
		hdrMasterEpoch: strconv.Itoa(int(masterEpoch)), hdrInvokeTime: strconv.FormatInt(time.Now().UnixMilli(), 10),
	}, body))
	if err != nil {
		return 0, fmt.Errorf("altering the SyncStateSet of %s to %v: %w", k, set, err)
	}
	n, err := strconv.ParseInt(resp.Ext(hdrNewSyncStateSetEpoch), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("altering the SyncStateSet of %s: answer without newSyncStateSetEpoch: %w", k, err)
	}
	return int32(n), nil
}

// GetReplicaInfo returns the group's master, epochs, SyncStateSet and
// members as the leader holds them.
func (c *Client) GetReplicaInfo(ctx context.Context, k GroupKey) (Group, error) {
	resp, err := c.call(ctx, request(remoting.CodeControllerGetReplicaInfo, map[string]string{
		hdrClusterName: k.Cluster, hdrBrokerName: k.BrokerName,
	}, nil))
	if err != nil {
		return Group{}, fmt.Errorf("replica info of %s: %w", k, err)
	}
	return groupFromReply(k, resp)
}

// ElectMaster asks for an election in the group: of brokerID when
// designate (admin), else by the election policy (refused with
// ErrMasterStillExist while the master is alive).
func (c *Client) ElectMaster(ctx context.Context, k GroupKey, brokerID int64, designate bool) (Group, error) {
	resp, err := c.call(ctx, request(remoting.CodeControllerElectMaster, map[string]string{
		hdrClusterName: k.Cluster, hdrBrokerName: k.BrokerName, hdrBrokerID: i64s(brokerID),
		hdrDesignateElect: strconv.FormatBool(designate), hdrInvokeTime: strconv.FormatInt(time.Now().UnixMilli(), 10),
	}, nil))
	if err != nil {
		return Group{}, fmt.Errorf("electing a master of %s: %w", k, err)
	}
	return groupFromReply(k, resp)
}

// Metadata is CONTROLLER_GET_METADATA_INFO's answer.
type Metadata struct {
	// LeaderID and LeaderAddr name the raft leader ("" while unknown).
	LeaderID, LeaderAddr string
	// IsLeader: the node that answered leads.
	IsLeader bool
	// Peers is the raft configuration, "id-addr;id-addr".
	Peers string
}

// Metadata asks the first controller that answers who leads.
func (c *Client) Metadata(ctx context.Context) (Metadata, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var last error
	for _, addr := range c.order() {
		cc, err := c.conn(ctx, addr)
		if err != nil {
			last = err
			continue
		}
		resp, err := cc.invoke(ctx, request(remoting.CodeControllerGetMetadataInfo, nil, nil))
		if err != nil {
			last = err
			continue
		}
		if resp.Code != remoting.Success {
			last = errorOf(resp.Code, resp.Remark)
			continue
		}
		isLeader, _ := strconv.ParseBool(resp.Ext(hdrIsLeader))
		return Metadata{LeaderID: resp.Ext(hdrControllerLeaderID), LeaderAddr: resp.Ext(hdrControllerLeaderAddress), IsLeader: isLeader, Peers: resp.Ext(hdrPeers)}, nil
	}
	return Metadata{}, fmt.Errorf("controller metadata: no controller answered: %w", last)
}

// groupFromReply rebuilds a Group from a replica answer's header and body
// (NextID is not sent and stays 0).
func groupFromReply(k GroupKey, resp *remoting.Command) (Group, error) {
	h := header{cmd: resp}
	g := Group{GroupKey: k}
	g.MasterID = h.int(hdrMasterBrokerID, 64, 0)
	g.MasterEpoch = int32(h.int(hdrMasterEpoch, 32, 0))
	g.SyncStateSetEpoch = int32(h.int(hdrSyncStateSetEpoch, 32, 0))
	if h.err != nil {
		return Group{}, fmt.Errorf("decoding the controller's replica answer: %w", h.err)
	}
	var body syncStateSetBody
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return Group{}, fmt.Errorf("decoding the controller's SyncStateSet body: %w", err)
	}
	g.SyncStateSet, g.Members = body.SyncStateSet, body.Members
	return g, nil
}
