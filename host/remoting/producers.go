package remoting

import (
	"encoding/json"
	"slices"
	"sync"
)

// producerTable is the producer group table RocketMQ's ProducerManager
// keeps: group → client id → the connection its last HEART_BEAT came on
// (producerDataSet). A connection's entries go when it closes. The broker
// uses it to reach a producer of a group with CHECK_TRANSACTION_STATE.
type producerTable struct {
	mu     sync.Mutex
	groups map[string]map[string]*Conn
	next   uint32 // round-robin start
}

func newProducerTable() *producerTable {
	return &producerTable{groups: make(map[string]map[string]*Conn)}
}

// heartbeat records that client id of group is reachable on c.
func (t *producerTable) heartbeat(group, id string, c *Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[group]
	if g == nil {
		g = make(map[string]*Conn)
		t.groups[group] = g
	}
	g[id] = c
}

// removeConn drops every entry on c.
func (t *producerTable) removeConn(c *Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, g := range t.groups {
		for id, gc := range g {
			if gc == c {
				delete(g, id)
			}
		}
		if len(g) == 0 {
			delete(t.groups, name)
		}
	}
}

// conns returns group's open connections, rotated by one on each call so
// that successive callers start at different producers (RocketMQ's
// getAvailableChannel is round-robin).
func (t *producerTable) conns(group string) []*Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*Conn
	for _, c := range t.groups[group] {
		if c.Context().Err() == nil && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b *Conn) int { return int(a.ID() - b.ID()) })
	t.next++
	k := int(t.next % uint32(len(out)))
	return append(out[k:], out[:k]...)
}

// producerHeartbeat is the part of a HEART_BEAT body the producer table
// reads.
type producerHeartbeat struct {
	ClientID        string `json:"clientID"`
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
}

// handleHeartbeatWithProducers records the heartbeat's producer groups in
// the producer table, then answers it as handleHeartbeat does (consumer
// groups).
func (b *Broker) handleHeartbeatWithProducers(req *Request) *Command {
	var hb producerHeartbeat
	if err := json.Unmarshal(req.Cmd.Body, &hb); err == nil && hb.ClientID != "" {
		for _, p := range hb.ProducerDataSet {
			if p.GroupName != "" {
				b.producers.heartbeat(p.GroupName, hb.ClientID, req.Conn)
			}
		}
	}
	return b.handleHeartbeat(req)
}
