package controller

import (
	"testing"
	"time"
)

func groupWith(masterID int64, epoch int32, set []int64, ids ...int64) *Group {
	g := &Group{GroupKey: GroupKey{"c", "b"}, MasterID: masterID, MasterEpoch: epoch, SyncStateSet: set}
	for _, id := range ids {
		g.Members = append(g.Members, Member{ID: id, Addr: "a"})
		g.NextID = id + 1
	}
	return g
}

func reported(hbs ...Heartbeat) map[int64]liveView {
	out := map[int64]liveView{}
	for _, hb := range hbs {
		out[hb.BrokerID] = liveView{hb: hb, reported: true}
	}
	return out
}

func TestChoose(t *testing.T) {
	cases := []struct {
		name    string
		g       *Group
		alive   map[int64]liveView
		unclean bool
		want    choice
	}{
		{"master alive stays", groupWith(1, 3, []int64{1, 2}, 1, 2, 3),
			reported(Heartbeat{BrokerID: 1}, Heartbeat{BrokerID: 2, MaxOffset: 99}), false, choice{decision: keep}},
		{"epoch beats offset", groupWith(1, 3, []int64{1, 2, 3}, 1, 2, 3),
			reported(Heartbeat{BrokerID: 2, Epoch: 3, MaxOffset: 10}, Heartbeat{BrokerID: 3, Epoch: 2, MaxOffset: 99}), false, choice{decision: electNew, id: 2}},
		{"offset beats priority", groupWith(1, 3, []int64{1, 2, 3}, 1, 2, 3),
			reported(Heartbeat{BrokerID: 2, Epoch: 3, MaxOffset: 10, Priority: 1}, Heartbeat{BrokerID: 3, Epoch: 3, MaxOffset: 11}), false, choice{decision: electNew, id: 3}},
		{"priority beats id", groupWith(1, 3, []int64{1, 2, 3}, 1, 2, 3),
			reported(Heartbeat{BrokerID: 2, Epoch: 3, MaxOffset: 10}, Heartbeat{BrokerID: 3, Epoch: 3, MaxOffset: 10, Priority: 5}), false, choice{decision: electNew, id: 3}},
		{"lowest id last", groupWith(1, 3, []int64{1, 2, 3}, 1, 2, 3),
			reported(Heartbeat{BrokerID: 3, MaxOffset: 10}, Heartbeat{BrokerID: 2, MaxOffset: 10}), false, choice{decision: electNew, id: 2}},
		{"only the SyncStateSet", groupWith(1, 3, []int64{1, 2}, 1, 2, 3),
			reported(Heartbeat{BrokerID: 2, MaxOffset: 1}, Heartbeat{BrokerID: 3, MaxOffset: 99}), false, choice{decision: electNew, id: 2}},
		{"no candidate clears", groupWith(1, 3, []int64{1, 2}, 1, 2, 3),
			reported(Heartbeat{BrokerID: 3, MaxOffset: 99}), false, choice{decision: noCandidate}},
		{"unclean when allowed", groupWith(1, 3, []int64{1, 2}, 1, 2, 3),
			reported(Heartbeat{BrokerID: 3, MaxOffset: 99}), true, choice{decision: electNew, id: 3, unclean: true}},
		{"no master, no candidate: keep trying", groupWith(0, 4, []int64{1}, 1, 2),
			reported(Heartbeat{BrokerID: 2}), false, choice{decision: keep}},
		{"no master, the set member returns", groupWith(0, 4, []int64{1}, 1, 2),
			reported(Heartbeat{BrokerID: 1}, Heartbeat{BrokerID: 2, MaxOffset: 5}), false, choice{decision: electNew, id: 1}},
		{"first election: every member", groupWith(0, 0, nil, 1, 2),
			reported(Heartbeat{BrokerID: 1, MaxOffset: 1}, Heartbeat{BrokerID: 2, MaxOffset: 5}), false, choice{decision: electNew, id: 2}},
		{"seeded candidate: wait", groupWith(1, 3, []int64{1, 2, 3}, 1, 2, 3),
			map[int64]liveView{2: {hb: Heartbeat{BrokerID: 2, MaxOffset: 5}, reported: true}, 3: {hb: Heartbeat{BrokerID: 3}}}, false, choice{decision: wait}},
	}
	for _, c := range cases {
		if got := choose(c.g, c.alive, c.unclean); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestLiveness(t *testing.T) {
	l := newLiveness()
	k := GroupKey{"c", "b"}
	t0 := time.Unix(1000, 0)
	g := groupWith(1, 1, []int64{1}, 1, 2)
	l.seed([]Group{*g}, t0)
	l.record(Heartbeat{Group: k, BrokerID: 2, MaxOffset: 7, Timeout: 5 * time.Second}, 9, t0)

	al := l.alive(k, t0.Add(time.Second), 2*time.Second, 0)
	if len(al) != 2 || al[1].reported || !al[2].reported {
		t.Fatalf("after seed and a heartbeat: %+v", al)
	}
	// The seeded member expires after the default timeout, the reporting
	// one after its own.
	al = l.alive(k, t0.Add(3*time.Second), 2*time.Second, 0)
	if _, ok := al[1]; ok || len(al) != 1 {
		t.Fatalf("at 3s: %+v", al)
	}
	// Its connection closes: dead at once.
	if !l.connClosed(9) || l.connClosed(9) {
		t.Fatal("connClosed reported wrongly")
	}
	if al = l.alive(k, t0.Add(time.Second), 2*time.Second, 0); len(al) != 1 {
		t.Fatalf("after the close: %+v", al)
	}
	// Unless it is the master: it may hold its lease (2/3 of its 5 s
	// timeout), so it is dead only ClosedMasterDead (about 4.2 s) after
	// its last heartbeat.
	if al = l.alive(k, t0.Add(4*time.Second), 2*time.Second, 2); !al[2].reported {
		t.Fatalf("a master 4 s after its last heartbeat, connection closed, counted dead before its lease surely ran out: %+v", al)
	}
	if al = l.alive(k, t0.Add(4300*time.Millisecond), 2*time.Second, 2); len(al) != 0 {
		t.Fatalf("a master whose connection closed still alive past ClosedMasterDead: %+v", al)
	}
	if d := ClosedMasterDead(3 * time.Second); d <= Lease(3*time.Second) || d >= 3*time.Second {
		t.Fatalf("ClosedMasterDead(3s) = %v: want between the lease %v and the timeout", d, Lease(3*time.Second))
	}
	// A heartbeat on a new connection revives it; seed keeps it.
	l.record(Heartbeat{Group: k, BrokerID: 2}, 10, t0.Add(4*time.Second))
	l.seed([]Group{*g}, t0.Add(4*time.Second))
	if al = l.alive(k, t0.Add(5*time.Second), 2*time.Second, 0); !al[2].reported {
		t.Fatalf("after a new heartbeat: %+v", al)
	}
	l.reset()
	if al = l.alive(k, t0.Add(5*time.Second), 2*time.Second, 0); len(al) != 0 {
		t.Fatalf("after reset: %+v", al)
	}
}

func TestConfigErrors(t *testing.T) {
	good := Config{NodeID: "n1", RaftAddr: "127.0.0.1:1", Dir: "/tmp/x", Peers: []Peer{{"n1", "127.0.0.1:1"}}}
	if _, err := good.withDefaults(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"no node id":      func(c *Config) { c.NodeID = "" },
		"no dir":          func(c *Config) { c.Dir = "" },
		"bad raft addr":   func(c *Config) { c.RaftAddr = "nope" },
		"no peers":        func(c *Config) { c.Peers = nil },
		"self not a peer": func(c *Config) { c.Peers = []Peer{{"n2", "127.0.0.1:2"}} },
		"addr mismatch":   func(c *Config) { c.Peers = []Peer{{"n1", "127.0.0.1:2"}} },
		"duplicate peer":  func(c *Config) { c.Peers = append(c.Peers, Peer{"n1", "127.0.0.1:3"}) },
		"peer without id": func(c *Config) { c.Peers = append(c.Peers, Peer{"", "127.0.0.1:3"}) },
	} {
		c := good
		c.Peers = append([]Peer(nil), good.Peers...)
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
