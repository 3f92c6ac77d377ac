package controller

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestAgent: an agent registers, heartbeats, is told it became master,
// holds its lease while the leader answers, and loses it at once when
// the leader's connection goes away.
func TestAgent(t *testing.T) {
	nodes := startCluster(t, 1)
	n := leaderOf(t, nodes, 10*time.Second)
	cl, err := NewClient([]string{n.addr}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	var changes []Group
	a, err := NewAgent(AgentConfig{
		Client:       cl,
		Registration: Registration{Group: GroupKey{"c1", "broker-a"}, Addr: "127.0.0.1:10911", NodeID: "a1"},
		Interval:     testBeatEvery,
		Position:     func() (int32, int64, int64) { return 0, 42, 42 },
		OnChange: func(id int64, g Group) {
			mu.Lock()
			changes = append(changes, g)
			mu.Unlock()
		},
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	eventually(t, 5*time.Second, "the agent told it is master", func() bool {
		g, ok := a.Group()
		return ok && g.MasterID == a.BrokerID() && a.BrokerID() == 1
	})
	mu.Lock()
	if len(changes) < 2 || changes[0].MasterID != 0 || changes[len(changes)-1].MasterEpoch != 1 {
		t.Fatalf("changes %+v: want registration without a master, then the election", changes)
	}
	mu.Unlock()
	if !a.Leased(time.Second) {
		t.Fatalf("no lease right after heartbeats (last contact %v ago)", time.Since(a.LastContact()))
	}
	n.stop()
	eventually(t, time.Second, "the lease lost with the connection", func() bool { return !a.Leased(time.Hour) })

	if _, err := NewAgent(AgentConfig{Client: cl, Registration: Registration{Group: GroupKey{"c", "b"}}, Interval: time.Second, Timeout: time.Second}); err == nil {
		t.Fatal("NewAgent accepted no Position, no address and a timeout not above the interval")
	}
}
