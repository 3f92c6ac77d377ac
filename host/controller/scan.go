package controller

import (
	"context"
	"errors"
	"time"
)

// run is the leader's scan loop: every ScanInterval, and at once when
// kicked (leadership gained, a heartbeat connection closed), it checks
// every group and commits the elections choose decides.
func (c *Controller) run(ctx context.Context) {
	t := time.NewTicker(c.cfg.ScanInterval)
	defer t.Stop()
	s := scanner{c: c, since: map[GroupKey]time.Time{}, warned: map[GroupKey]bool{}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		if !c.ready.Load() {
			clear(s.since)
			clear(s.warned)
			continue
		}
		s.scan(time.Now())
	}
}

// scanner holds the scan loop's memory: when each group's trouble was
// first seen (for the election duration) and which groups were already
// reported as having nobody to elect.
type scanner struct {
	c      *Controller
	since  map[GroupKey]time.Time
	warned map[GroupKey]bool
}

func (s *scanner) scan(now time.Time) {
	for _, g := range s.c.Groups() {
		s.scanGroup(&g, now)
	}
}

func (s *scanner) scanGroup(g *Group, now time.Time) {
	c := s.c
	ch := choose(g, c.live.alive(g.GroupKey, now, c.cfg.HeartbeatTimeout, g.MasterID), c.cfg.ElectUnclean)
	if ch.decision == keep && g.MasterID != 0 {
		delete(s.since, g.GroupKey)
		delete(s.warned, g.GroupKey)
		return
	}
	if _, ok := s.since[g.GroupKey]; !ok {
		s.since[g.GroupKey] = now
	}
	switch ch.decision {
	case keep: // no master, nobody to elect: try again next scan (RocketMQ #5009)
		if !s.warned[g.GroupKey] && len(g.Members) > 0 {
			c.log.Warn("broker group has no master and no live candidate; retrying every scan", "group", g.GroupKey, "syncStateSet", g.SyncStateSet, "masterEpoch", g.MasterEpoch)
			s.warned[g.GroupKey] = true
		}
	case wait:
	case noCandidate:
		c.log.Warn("master is gone and no member of the SyncStateSet is alive; the group has no master until one returns", "group", g.GroupKey, "master", g.MasterID, "syncStateSet", g.SyncStateSet)
		s.commit(g, electCmd{Group: g.GroupKey, ExpectEpoch: g.MasterEpoch})
	case electNew:
		s.commit(g, electCmd{Group: g.GroupKey, ExpectEpoch: g.MasterEpoch, NewMaster: ch.id, Unclean: ch.unclean})
	}
}

func (s *scanner) commit(g *Group, e electCmd) {
	c := s.c
	res, err := c.apply(command{Type: cmdElect, Elect: &e})
	if err != nil {
		if !errors.Is(err, ErrNotLeader) {
			c.met.electionFailures.Inc()
		}
		c.log.Warn("election not committed; retrying at the next scan", "group", g.GroupKey, "candidate", e.NewMaster, "err", err)
		return
	}
	if e.NewMaster == 0 {
		return
	}
	took := time.Since(s.since[g.GroupKey])
	delete(s.since, g.GroupKey)
	delete(s.warned, g.GroupKey)
	c.met.elected(took)
	c.log.Info("elected a new master", "group", g.GroupKey, "master", res.Group.MasterID, "masterEpoch", res.Group.MasterEpoch,
		"previous", g.MasterID, "unclean", e.Unclean, "took", took)
}
