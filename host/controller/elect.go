package controller

import (
	"cmp"
	"slices"
)

// decision is the leader's choice for a group at one scan.
type decision int

const (
	// keep: nothing to do (master alive, or nobody better to elect).
	keep decision = iota
	// electNew: elect the chosen candidate.
	electNew
	// wait: a live candidate has not reported its position to this leader
	// yet (seeded after a leader change); decide at a later scan, so the
	// member with the most data is not passed over.
	wait
	// noCandidate: the master is gone and nobody can be elected.
	noCandidate
)

// choice is what choose decided.
type choice struct {
	decision decision
	id       int64
	unclean  bool
}

// choose decides a group's election from the brokers alive now.
//
// The master, when there is one and it is alive, stays (RocketMQ keeps a
// valid old master). Otherwise the candidates are the live members of the
// SyncStateSet (every live member at the group's first election, see
// eligible), ranked by epoch (high first), max offset (high first),
// priority (low first, none given counts last) and broker id (low first).
// When there are none and allowUnclean, every live member is a candidate
// and the election is unclean. A group without a master and without a
// candidate is left as it is (the next scan tries again, RocketMQ #5009); a
// group whose master died with no candidate gets noCandidate, so that the
// master is cleared and its epoch fenced.
func choose(g *Group, alive map[int64]liveView, allowUnclean bool) choice {
	if g.MasterID != 0 {
		if _, ok := alive[g.MasterID]; ok {
			return choice{decision: keep}
		}
	}
	pick := func(clean bool) (choice, bool) {
		var cands []Heartbeat
		for _, m := range g.Members {
			v, ok := alive[m.ID]
			if !ok || m.ID == g.MasterID || (clean && !eligible(g, m.ID)) {
				continue
			}
			if !v.reported {
				return choice{decision: wait}, true
			}
			cands = append(cands, v.hb)
		}
		if len(cands) == 0 {
			return choice{}, false
		}
		best := slices.MinFunc(cands, rank)
		return choice{decision: electNew, id: best.BrokerID, unclean: !clean}, true
	}
	if c, ok := pick(true); ok {
		return c
	}
	if allowUnclean {
		if c, ok := pick(false); ok {
			return c
		}
	}
	if g.MasterID != 0 {
		return choice{decision: noCandidate}
	}
	return choice{decision: keep}
}

// rank orders candidates best first.
func rank(a, b Heartbeat) int {
	prio := func(p int32) int64 {
		if p <= 0 {
			return int64(1) << 40
		}
		return int64(p)
	}
	return cmp.Or(
		cmp.Compare(b.Epoch, a.Epoch),
		cmp.Compare(b.MaxOffset, a.MaxOffset),
		cmp.Compare(prio(a.Priority), prio(b.Priority)),
		cmp.Compare(a.BrokerID, b.BrokerID),
	)
}
