package controller

import (
	"math"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
)

// ctrlMetrics is the controller's metric set.
type ctrlMetrics struct {
	set *vm.Set
	// elections counts committed elections that gave a group a master.
	elections *vm.Counter
	// electionFailures counts elections the state machine or raft refused
	// while this node led (not lost leadership).
	electionFailures *vm.Counter
	// lastElection holds the float64 bits of the last election's duration
	// in seconds: from when the leader first saw the group without a live
	// master to the commit of the new one.
	lastElection atomic.Uint64
}

func newCtrlMetrics() *ctrlMetrics {
	s := vm.NewSet()
	m := &ctrlMetrics{
		set:              s,
		elections:        s.NewCounter("keel_controller_elections_total"),
		electionFailures: s.NewCounter("keel_controller_election_failures_total"),
	}
	s.NewGauge("keel_controller_last_election_seconds", func() float64 {
		return math.Float64frombits(m.lastElection.Load())
	})
	return m
}

func (m *ctrlMetrics) elected(took time.Duration) {
	m.elections.Inc()
	m.lastElection.Store(math.Float64bits(took.Seconds()))
}
