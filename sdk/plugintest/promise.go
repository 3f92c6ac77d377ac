package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
)

// promise checks replication's core promise from the stores themselves,
// never from what the plugin reports about its replicas: whenever the
// master's replicator reports an AckedOffset A (which releases producers'
// acks up to A), at least need replica stores hold every byte of the
// master's log below A, byte for byte at the same offsets (and, for a
// policy whose replicas acknowledge after flushing, flushed below A on
// the replica). need is max(1, WaitReplicas): the AckedOffset contract
// counts WaitReplicas replicas, and one for a policy that does not wait.
//
// It keeps, per replica, the prefix of its log already found equal to the
// master's, and extends it on demand; a truncation through the replica's
// Host, or a store reopened after a restart or a power cut, lowers it.
// Offsets first acknowledged while fewer than need replicas held them are
// kept per fault, so acknowledged records can be counted against them.
type promise struct {
	need    int
	flushed bool

	mu       sync.Mutex
	master   func() *core.Store
	replicas []*replicaView
	fault    string
	acked    int64 // highest AckedOffset reported by the current master
	bad      []badRange
	reports  int
	// pending are reports that failed while a replica was down: a down
	// replica counts as holding what its store said it had flushed when
	// it went down, but a flush completing at that moment may have made
	// more durable, and acknowledged, than the store reported yet. They
	// are judged again when the replica's store reopens, from what its
	// disk really kept (setDown(r, false)).
	pending []pendingReport
}

// pendingReport is a report judged again once no replica is down.
type pendingReport struct {
	st    sdk.ReplicationState
	prev  int64
	fault string
	to    *checkedHost
}

// replicaView is one replica's store as the promise sees it.
type replicaView struct {
	name     string
	store    func() *core.Store // nil while the replica's store is closed
	down     bool
	downHeld int64 // what it held when it went down
	// recovered is where its log ended when its store was last reopened:
	// bytes read back from its disk are durable, though the reopened
	// store may report a lower flushed offset.
	recovered int64
	verified  int64 // [0, verified) equals the master's log
}

// badRange is acknowledged offsets (from, to] that were not held.
type badRange struct {
	fault    string
	from, to int64
	held     int // replicas holding them when acknowledged
}

func newPromise(need int, flushed bool) *promise {
	return &promise{need: max(1, need), flushed: flushed}
}

// setFault names the fault under way; what goes wrong from now on is
// counted against it.
func (p *promise) setFault(name string) {
	p.mu.Lock()
	p.fault = name
	p.mu.Unlock()
}

// reset points the promise at a (new) master and replica set; every
// replica's prefix is checked again from the start.
func (p *promise) reset(master func() *core.Store, replicas []*replicaView) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.master, p.replicas, p.acked = master, replicas, 0
	for _, r := range replicas {
		r.verified = 0
	}
}

// masterRestarted: the master's acknowledged offset starts again from 0
// (a new replicator instance on a reopened store).
func (p *promise) masterRestarted() {
	p.mu.Lock()
	p.acked = 0
	p.mu.Unlock()
}

// setDown marks a replica's store about to close (down) or open again.
// While down it counts as holding what it held when it went down (bytes
// it had received may still be acknowledged); reopened, its verified
// prefix is cut to its recovered log end, and the reports that failed
// while it was down are judged again (see promise.pending).
func (p *promise) setDown(r *replicaView, down bool) {
	p.mu.Lock()
	if down {
		r.downHeld = p.extendLocked(r, r.store().Positions().Committed)
		r.down = true
		p.mu.Unlock()
		return
	}
	r.down = false
	r.recovered = r.store().Positions().Committed
	r.verified = min(r.verified, r.recovered)
	up := !p.anyDownLocked()
	p.mu.Unlock()
	if up {
		p.judgePending()
	}
}

// judgePending judges the reports still waiting for a down replica, as
// they stand.
func (p *promise) judgePending() {
	p.mu.Lock()
	again := p.pending
	p.pending = nil
	var msgs []string
	var tos []*checkedHost
	for _, pr := range again {
		if v := p.judgeLocked(pr.st, pr.prev, pr.fault); v != "" {
			msgs, tos = append(msgs, v), append(tos, pr.to)
		}
	}
	p.mu.Unlock()
	for i, v := range msgs {
		tos[i].violation(v)
	}
}

func (p *promise) anyDownLocked() bool {
	for _, r := range p.replicas {
		if r.down {
			return true
		}
	}
	return false
}

// truncated: the replica's log was cut back to off.
func (p *promise) truncated(r *replicaView, off int64) {
	r.verified = min(r.verified, off) // p.mu held by the caller
	r.recovered = min(r.recovered, off)
}

// report checks one ReportReplication of the master for to; it returns
// a description of the violation, or "" (also when the verdict waits for
// a down replica to reopen: to hears of it then).
func (p *promise) report(st sdk.ReplicationState, to *checkedHost) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports++
	if st.AckedOffset <= p.acked {
		return ""
	}
	prev := p.acked
	p.acked = st.AckedOffset
	if p.anyDownLocked() {
		if held, _ := p.heldLocked(st.AckedOffset); held < st.AckedOffset {
			p.pending = append(p.pending, pendingReport{st: st, prev: prev, fault: p.fault, to: to})
		}
		return ""
	}
	return p.judgeLocked(st, prev, p.fault)
}

// judgeLocked checks that need replicas hold the master's log below
// st.AckedOffset, recording the range acknowledged since prev as bad
// under fault when they do not.
func (p *promise) judgeLocked(st sdk.ReplicationState, prev int64, fault string) string {
	held, holders := p.heldLocked(st.AckedOffset)
	if held >= st.AckedOffset {
		return ""
	}
	p.bad = append(p.bad, badRange{fault: fault, from: max(prev, held), to: st.AckedOffset, held: len(holders)})
	return fmt.Sprintf("fault %q: the replicator reported AckedOffset %d, but only %d replica store(s) hold the master's log below it (need %d; replicas hold it up to %s; reported InSync %d)",
		fault, st.AckedOffset, len(holders), p.need, p.describeLocked(), st.InSync)
}

// heldLocked returns the offset below which at least need replicas hold
// the master's log (looking no further than upTo) and the names of the
// replicas holding it up to upTo.
func (p *promise) heldLocked(upTo int64) (int64, []string) {
	var ends []int64
	var holders []string
	for _, r := range p.replicas {
		e := p.extendLocked(r, upTo)
		ends = append(ends, e)
		if e >= upTo {
			holders = append(holders, r.name)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] > ends[j] })
	if len(ends) < p.need {
		return 0, holders
	}
	return ends[p.need-1], holders
}

// extendLocked compares r's log with the master's from its verified
// prefix up to upTo and returns how far r holds the master's log (and
// has it flushed, when the policy acknowledges flushed bytes).
func (p *promise) extendLocked(r *replicaView, upTo int64) int64 {
	switch {
	case r.down:
		return r.downHeld
	case p.master == nil:
		return 0
	}
	rs, ms := r.store(), p.master()
	for r.verified < upTo {
		rb, err := rs.ReadLog(r.verified, 256<<10)
		if err != nil || len(rb) == 0 {
			break
		}
		mb, err := ms.ReadLog(r.verified, len(rb))
		if err != nil || len(mb) == 0 {
			break
		}
		n := min(len(rb), len(mb))
		if !bytes.Equal(rb[:n], mb[:n]) {
			break
		}
		r.verified += int64(n)
	}
	held := r.verified
	if p.flushed {
		held = min(held, max(rs.Positions().Flushed, r.recovered))
	}
	return held
}

func (p *promise) describeLocked() string {
	var parts []string
	for _, r := range p.replicas {
		state := fmt.Sprint(r.verified)
		if r.down {
			state = fmt.Sprintf("%d (down)", r.downHeld)
		} else if p.flushed {
			state += fmt.Sprintf(" (flushed %d)", r.store().Positions().Flushed)
		}
		parts = append(parts, r.name+" "+state)
	}
	return strings.Join(parts, ", ")
}

// ackedNow is the highest AckedOffset the current master reported.
func (p *promise) ackedNow() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// counts returns need and the number of reports checked.
func (p *promise) counts() (need, reports int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.need, p.reports
}

// held returns the offset below which need replicas hold the master's log
// now, looking no further than upTo.
func (p *promise) held(upTo int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, _ := p.heldLocked(upTo)
	return h
}

// unheld counts the acknowledged record ends that lie in a range
// acknowledged while not held, per fault.
func (p *promise) unheld(ends []int64) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, e := range ends {
		for _, b := range p.bad {
			if e > b.from && e <= b.to {
				out[b.fault]++
				break
			}
		}
	}
	return out
}

// checkedHost is the Host a master-role replicator gets: every
// ReportReplication is checked against the replica stores before the host
// sees it.
type checkedHost struct {
	sdk.Host
	p      *promise
	mu     sync.Mutex
	errs   []string
	nviols int
}

func (h *checkedHost) ReportReplication(ctx context.Context, st sdk.ReplicationState) error {
	if v := h.p.report(st, h); v != "" {
		h.violation(v)
	}
	return h.Host.ReportReplication(ctx, st)
}

func (h *checkedHost) violation(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nviols++
	if len(h.errs) < 3 {
		h.errs = append(h.errs, v)
	}
}

func (h *checkedHost) violations() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nviols, slices.Clone(h.errs)
}

// replicaHost is the Host a slave-role replicator gets: truncations lower
// the replica's verified prefix.
type replicaHost struct {
	sdk.Host
	p *promise
	r *replicaView
}

func (h *replicaHost) TruncateLog(ctx context.Context, off int64) error {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	err := h.Host.TruncateLog(ctx, off)
	h.p.truncated(h.r, off)
	return err
}
