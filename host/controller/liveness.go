package controller

import (
	"sync"
	"time"
)

// Heartbeat is what a broker reports in BROKER_HEARTBEAT.
type Heartbeat struct {
	Group    GroupKey
	BrokerID int64
	// Addr is the broker's client-facing address (informational).
	Addr string
	// Epoch is the last master epoch in the broker's epoch history.
	Epoch int32
	// MaxOffset is the broker's CommitLog max offset.
	MaxOffset int64
	// ConfirmOffset is the offset its replication confirmed.
	ConfirmOffset int64
	// Timeout is how long the controller may wait for the next heartbeat
	// before the broker counts as dead; 0 takes Config.HeartbeatTimeout.
	Timeout time.Duration
	// Priority is the election priority: lower wins among equals (RocketMQ
	// brokerElectionPriority); 0 means none given.
	Priority int32
}

// beat is the leader's memory of one broker.
type beat struct {
	hb Heartbeat
	at time.Time
	// reported: hb came from a heartbeat. A seeded entry (the member was
	// known when this node became leader, or just registered) is alive
	// but has no position to rank it by.
	reported bool
	// conn is the remoting connection of the last heartbeat (0: none);
	// closed is set when it closes.
	conn   uint64
	closed bool
}

// liveness is the leader's heartbeat table. It is memory only, never
// raft state: a new leader starts it afresh (see seed). Safe for
// concurrent use.
type liveness struct {
	mu    sync.Mutex
	beats map[GroupKey]map[int64]*beat
}

func newLiveness() *liveness { return &liveness{beats: map[GroupKey]map[int64]*beat{}} }

func (l *liveness) entry(k GroupKey, id int64) *beat {
	m := l.beats[k]
	if m == nil {
		m = map[int64]*beat{}
		l.beats[k] = m
	}
	b := m[id]
	if b == nil {
		b = &beat{}
		m[id] = b
	}
	return b
}

// record stores a heartbeat that arrived on connection conn at now.
func (l *liveness) record(hb Heartbeat, conn uint64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.entry(hb.Group, hb.BrokerID)
	*b = beat{hb: hb, at: now, reported: true, conn: conn}
}

// seed marks every member of groups as just seen, without a position, so
// that a new leader gives each a full timeout before deciding it is dead
// (RocketMQ #5712: a leader without history never noticed brokers that
// died during the switch). Entries already present are kept.
func (l *liveness) seed(groups []Group, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range groups {
		for _, m := range g.Members {
			l.seedLocked(g.GroupKey, m.ID, now)
		}
	}
}

// seedOne is seed for one member (just registered).
func (l *liveness) seedOne(k GroupKey, id int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seedLocked(k, id, now)
}

func (l *liveness) seedLocked(k GroupKey, id int64, now time.Time) {
	if m := l.beats[k]; m != nil && m[id] != nil {
		return
	}
	b := l.entry(k, id)
	b.hb = Heartbeat{Group: k, BrokerID: id}
	b.at = now
}

// connClosed marks the brokers whose last heartbeat came on conn as dead
// at once (RocketMQ onBrokerChannelClose) and reports whether any was.
func (l *liveness) connClosed(conn uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	any := false
	for _, m := range l.beats {
		for _, b := range m {
			if b.conn == conn && !b.closed {
				b.closed = true
				any = true
			}
		}
	}
	return any
}

// reset forgets everything (leadership lost).
func (l *liveness) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.beats = map[GroupKey]map[int64]*beat{}
}

// liveView is one broker's state as seen at a scan.
type liveView struct {
	hb       Heartbeat
	reported bool
}

// alive returns the brokers of group k alive at now: seen within their
// timeout (def when they gave none) on a connection that has not closed.
// The group's master (masterID) is the exception to the second rule: a
// master whose heartbeat connection closed may still hold its lease, so
// it counts as dead only once ClosedMasterDead says the lease has surely
// run out (a crashed master is replaced that much later; a cut-off one has
// stopped acknowledging by then).
func (l *liveness) alive(k GroupKey, now time.Time, def time.Duration, masterID int64) map[int64]liveView {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int64]liveView{}
	for id, b := range l.beats[k] {
		to := b.hb.Timeout
		if to <= 0 {
			to = def
		}
		switch {
		case now.Sub(b.at) > to:
			continue
		case b.closed && (id != masterID || now.Sub(b.at) > ClosedMasterDead(to)):
			continue
		}
		out[id] = liveView{hb: b.hb, reported: b.reported}
	}
	return out
}

// Lease is how long a master may go on acknowledging writes after the
// send time of its last heartbeat the leader answered, for a heartbeat
// timeout t: 2t/3. It is the one home of the lease rule: brokers apply
// it (Agent.Leased), and the leader counts a master dead no earlier than
// t after its last heartbeat arrived, or ClosedMasterDead(t) after it
// when its connection closed, both later than the lease.
func Lease(t time.Duration) time.Duration { return t * 2 / 3 }

// ClosedMasterDead is how long after its last heartbeat a master whose
// heartbeat connection closed counts as dead: halfway between its lease
// and the heartbeat timeout t, so that a master that checks its lease
// every few hundred milliseconds has stopped acknowledging writes before
// another is elected.
func ClosedMasterDead(t time.Duration) time.Duration { return Lease(t) + (t-Lease(t))/2 }
