package semantics

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/report"
	"github.com/keelmq/keel/bench/wire"
	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host"
)

// MinDelay is the shortest delay of a benchmark timer.
const MinDelay = time.Second

// deliveryGrace is how long after the last due time RunTimers waits for
// the last delivery before it counts the rest as missing.
const deliveryGrace = 15 * time.Second

// TimerSpec is one timer run.
type TimerSpec struct {
	// Node is the node's spec (profile, dir, queues); Load the
	// generator's (Addr, Count, TimerDelay and Duration are set here).
	Node wire.NodeSpec
	Load wire.LoadSpec
	// Count timers with delays uniform over [MinDelay, Window].
	Count  int64
	Window time.Duration
}

// Delay spreads ids uniformly over [MinDelay, window] (a multiplicative
// hash of the id, so neighbouring messages fall due far apart).
func Delay(window time.Duration) func(id uint64) time.Duration {
	span := uint64(window - MinDelay)
	return func(id uint64) time.Duration {
		h := id * 0x9E3779B97F4A7C15
		return MinDelay + time.Duration((h>>11)%(span+1))
	}
}

// TimerResult is what one timer run measured: the report's row and the
// lateness of every delivered copy (ns).
type TimerResult struct {
	Row      report.TimerRun
	Lateness hist.Histogram
	// Send is the generator's result of the timer sends.
	Send *wire.Result
}

// RunTimers starts a node, sends s.Count timer messages, waits until
// every one is delivered or deliveryGrace after the last due time, reads
// the real topic back and stops the node, removing s.Node.Dir.
func RunTimers(ctx context.Context, s TimerSpec) (res *TimerResult, err error) {
	if s.Count < 1 || s.Window < MinDelay {
		return nil, fmt.Errorf("semantics: timer run needs Count >= 1 and Window >= %v (got %d, %v)", MinDelay, s.Count, s.Window)
	}
	err = wire.WithNode(ctx, s.Node, func(n *host.Node) error {
		r, err := runTimers(ctx, s, n)
		res = r
		return err
	})
	return res, err
}

// runTimers is RunTimers on a started node.
func runTimers(ctx context.Context, s TimerSpec, n *host.Node) (*TimerResult, error) {
	ls := s.Load
	ls.Addr, ls.Count, ls.TimerDelay = n.Addr("broker"), s.Count, Delay(s.Window)
	ls.Topic = cmp.Or(ls.Topic, wire.DefaultTopic)
	ls.Queues = cmp.Or(ls.Queues, cmp.Or(s.Node.Queues, wire.DefaultQueues))
	if ls.Duration <= 0 {
		ls.Duration = 10*s.Window + time.Minute // a bound: the run ends after Count
	}
	if err := wire.Prime(ctx, ls); err != nil {
		return nil, err
	}
	st := n.Store()
	res := &TimerResult{}
	before := sampleMemory()
	sent, err := wire.Load(ctx, ls)
	if err != nil {
		return nil, fmt.Errorf("semantics: timer sends: %w", err)
	}
	res.Send = sent
	sendEnd := time.Now()
	afterSend := sampleMemory()
	stored := func() int64 { return queued(st, ls.Topic, ls.Queues) - 1 } // less the priming message
	row := &res.Row
	row.Sent, row.SendMsgsPerSec, row.SendP99us = sent.Msgs, sent.MsgsPerSec, float64(sent.Latency.Quantile(0.99))/1e3
	row.PendingAtSendEnd = max(sent.Msgs-stored(), 0)
	deadline := sendEnd.Add(s.Window + deliveryGrace)
	for stored() < sent.Msgs && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	afterDeliver := sampleMemory()
	row.RSSBeforeBytes, row.AnonBeforeBytes, row.HeapBeforeBytes = before.rss, before.anon, before.heap
	row.RSSAfterSendBytes, row.AnonAfterSendBytes, row.HeapAfterSendBytes = afterSend.rss, afterSend.anon, afterSend.heap
	row.RSSAfterDeliveryBytes, row.AnonAfterDeliverBytes, row.HeapAfterDeliverBytes = afterDeliver.rss, afterDeliver.anon, afterDeliver.heap
	d, err := readDeliveries(st, ls.Topic, ls.Queues, &res.Lateness)
	if err != nil {
		return nil, err
	}
	row.Delivered, row.Duplicates, row.Early = d.distinct, d.duplicates, d.early
	row.Missing = max(sent.Msgs-d.distinct, 0)
	row.LatenessP50Ms = float64(res.Lateness.Quantile(0.5)) / 1e6
	row.LatenessP99Ms = float64(res.Lateness.Quantile(0.99)) / 1e6
	row.LatenessMaxMs = float64(res.Lateness.Max()) / 1e6
	return res, nil
}

// queued is the number of records in topic's queues 0..queues-1.
func queued(st *core.Store, topic string, queues int) int64 {
	var n int64
	for q := range queues {
		n += st.MaxQueueOffset(topic, int32(q)) - st.MinQueueOffset(topic, int32(q))
	}
	return n
}

// deliveries counts what readDeliveries found.
type deliveries struct {
	distinct, duplicates, early int64
}

// readDeliveries reads every record of topic's queues that carries
// wire.PropertyDue and records its lateness (store time minus due time,
// ns) in h; a copy stored before its due time is counted as early
// instead, and a second copy of the same message (KEYS) as a duplicate.
func readDeliveries(st *core.Store, topic string, queues int, h *hist.Histogram) (deliveries, error) {
	var d deliveries
	seen := map[uint64]struct{}{}
	for q := range queues {
		off := st.MinQueueOffset(topic, int32(q))
		for end := st.MaxQueueOffset(topic, int32(q)); off < end; {
			g, err := st.GetMessages(topic, int32(q), off, 1024, 4<<20, nil)
			if err != nil {
				return d, fmt.Errorf("semantics: read %s queue %d at %d: %w", topic, q, off, err)
			}
			if g.Status != core.Found || len(g.Sizes) == 0 || g.NextOffset <= off {
				return d, fmt.Errorf("semantics: read %s queue %d at %d: %v, next offset %d", topic, q, off, g.Status, g.NextOffset)
			}
			data := g.Data
			for _, size := range g.Sizes {
				rec, err := record.Decode(data[:size])
				if err != nil {
					return d, fmt.Errorf("semantics: decode a record of %s queue %d near %d: %w", topic, q, off, err)
				}
				data = data[size:]
				if err := d.add(rec, seen, h); err != nil {
					return d, err
				}
			}
			off = g.NextOffset
		}
	}
	return d, nil
}

// add counts one record of the real topic.
func (d *deliveries) add(rec *record.Record, seen map[uint64]struct{}, h *hist.Histogram) error {
	v, ok := record.GetProperty(rec.Properties, wire.PropertyDue)
	if !ok {
		return nil // the priming message
	}
	due, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("semantics: record at %d has %s %q: %w", rec.PhysOffset, wire.PropertyDue, v, err)
	}
	k, _ := record.GetProperty(rec.Properties, record.PropertyKeys)
	id, err := strconv.ParseUint(k, 16, 64)
	if err != nil {
		return fmt.Errorf("semantics: record at %d has KEYS %q, not a generator id: %w", rec.PhysOffset, k, err)
	}
	if _, dup := seen[id]; dup {
		d.duplicates++
		return nil
	}
	seen[id] = struct{}{}
	d.distinct++
	late := rec.StoreTimestamp - due
	if late < 0 {
		d.early++
		return nil
	}
	h.Record(late * int64(time.Millisecond))
	return nil
}
