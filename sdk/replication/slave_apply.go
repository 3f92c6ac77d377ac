package replication

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/keelmq/keel/sdk"
)

// applier applies one session's frames to the slave's log.
type applier struct {
	s          *slave
	c          *Conn
	log        *slog.Logger
	hist       []sdk.Epoch
	end        int64
	ackFlushed bool
	streaming  bool
	pending    bool
	lastAck    time.Time
	ackBuf     []byte // ACK payloads, reused
}

// servePull sends the master the slave's [p.From, p.To).
func (a *applier) servePull(p Pull) error {
	s := a.s
	if p.To > a.end {
		a.c.SendError(CodeProtocol, fmt.Sprintf("pull beyond this replica's log end %d", a.end))
		return fmt.Errorf("master pulled [%d,%d) beyond this log's end %d", p.From, p.To, a.end)
	}
	a.log.Warn("HA: the master is behind this replica: sending it our log", "from", p.From, "to", p.To)
	rd := newLogReader(s.host)
	for off := p.From; off < p.To; {
		data, err := rd.read(s.ctx, off, s.opts.BatchSize)
		if err != nil {
			a.c.SendError(CodeInternal, err.Error())
			return fmt.Errorf("read log for the master at %d: %w", off, err)
		}
		if len(data) == 0 {
			return fmt.Errorf("read log for the master at %d: nothing", off)
		}
		if off+int64(len(data)) > p.To {
			data = data[:p.To-off]
		}
		if err := a.c.WriteFrame(false, FrameData, DataHeader{Offset: off, Committed: a.end}.Marshal(), data); err != nil {
			return err
		}
		off += int64(len(data))
	}
	// Then this replica's metadata: a master that lost its disk must get
	// back the consumer offsets (and groups, topics, delay offsets) along
	// with the log, or its consumers restart from 0 (ROCKETMQ-348).
	snap, err := s.host.MetaSnapshot(s.ctx)
	if err != nil {
		a.c.SendError(CodeInternal, err.Error())
		return fmt.Errorf("metadata snapshot for the master: %w", err)
	}
	if err := a.c.WriteFrame(false, FrameMeta, snap); err != nil {
		return err
	}
	return a.c.Flush()
}

// applyPlan truncates to the plan's offset and adopts its history.
func (a *applier) applyPlan(p Plan) error {
	s := a.s
	pos, err := s.host.Positions(s.ctx)
	if err != nil {
		return err
	}
	if p.From < pos.Committed {
		a.log.Warn("HA: cutting this log's divergent tail at the consistent point", "from", p.From, "to", pos.Committed)
		if err := s.host.TruncateLog(s.ctx, p.From); err != nil {
			return fmt.Errorf("truncate to the consistent point %d: %w", p.From, err)
		}
		s.n.met.truncations.Inc()
	} else if p.From > pos.Committed && pos.Committed != pos.Min {
		return fmt.Errorf("master plans to stream from %d but this log ends at %d", p.From, pos.Committed)
	}
	cur, err := s.host.Epochs(s.ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(cur, p.Epochs) {
		if err := s.host.SetEpochs(s.ctx, p.Epochs); err != nil {
			return fmt.Errorf("adopt the master's epoch history: %w", err)
		}
	}
	maxE := p.MaxEpoch
	if len(p.Epochs) > 0 {
		maxE = max(maxE, p.Epochs[len(p.Epochs)-1].Epoch)
	}
	if err := s.n.state.update(func(ns *NodeState) {
		ns.MaxEpoch = max(ns.MaxEpoch, maxE)
		ns.Takeovers = append(ns.Takeovers, p.Takeovers...)
	}); err != nil {
		a.log.Error("HA: persist replication state", "err", err)
	}
	a.hist, a.end, a.ackFlushed, a.streaming = slices.Clone(p.Epochs), p.From, p.AckFlushed, true
	s.mu.Lock()
	s.end = p.From
	s.mu.Unlock()
	a.log.Info("HA: streaming from master", "from", p.From, "ack_on_flushed", p.AckFlushed)
	return a.ack()
}

// applyData appends one DATA frame at the slave's end.
func (a *applier) applyData(payload []byte) error {
	s := a.s
	h, data, err := DecodeData(payload)
	if err != nil {
		return s.protocol(a.c, err.Error())
	}
	if h.Offset != a.end || len(data) == 0 {
		return s.protocol(a.c, fmt.Sprintf("data at %d (%d bytes), this log ends at %d", h.Offset, len(data), a.end))
	}
	if h.Epoch != 0 {
		n := len(a.hist)
		switch {
		case n > 0 && a.hist[n-1].Epoch == h.Epoch && a.hist[n-1].StartOffset == h.EpochStart:
		case n == 0 || (h.Epoch > a.hist[n-1].Epoch && h.EpochStart >= a.hist[n-1].StartOffset):
			next := append(slices.Clone(a.hist), sdk.Epoch{Epoch: h.Epoch, StartOffset: h.EpochStart})
			if err := s.host.SetEpochs(s.ctx, next); err != nil {
				return fmt.Errorf("record epoch %d at %d: %w", h.Epoch, h.EpochStart, err)
			}
			a.hist = next
			if err := s.n.state.update(func(ns *NodeState) { ns.MaxEpoch = max(ns.MaxEpoch, h.Epoch) }); err != nil {
				a.log.Error("HA: persist replication state", "err", err)
			}
		default:
			return s.protocol(a.c, fmt.Sprintf("data in epoch %d (from %d) does not follow this history's last epoch %v", h.Epoch, h.EpochStart, a.hist[n-1]))
		}
	}
	if err := s.host.AppendLog(s.ctx, h.Offset, data); err != nil {
		a.c.SendError(CodeInternal, err.Error())
		return fmt.Errorf("append replicated data at %d: %w", h.Offset, err)
	}
	a.end += int64(len(data))
	a.pending = true
	s.n.met.bytesReceived.Add(len(data))
	s.mu.Lock()
	s.end = a.end
	s.masterCommitted = max(s.masterCommitted, h.Committed)
	s.mu.Unlock()
	return nil
}

// ack reports the slave's end (and, when the master asks for flushed
// acknowledgements, flushes first).
func (a *applier) ack() error {
	s := a.s
	m := Ack{Received: a.end}
	if a.ackFlushed {
		f, err := s.host.Flush(s.ctx)
		if err != nil {
			return fmt.Errorf("flush before acknowledging: %w", err)
		}
		m.Flushed = min(f, a.end)
	}
	a.ackBuf = m.appendTo(a.ackBuf[:0])
	if err := a.c.WriteFrame(true, FrameAck, a.ackBuf); err != nil {
		return err
	}
	a.pending = false
	a.lastAck = time.Now()
	return nil
}

// streamAckInterval is how often a streaming replica acknowledges under a
// continuous stream (one that never drains its input).
const streamAckInterval = 250 * time.Microsecond

// ackDue reports whether to acknowledge now, given whether more input is
// already here. Only a streaming session acknowledges: when the input is
// drained (acks coalesce over whatever arrived together) and there is
// something to acknowledge or HeartbeatInterval passed since the last
// ack, and under a continuous stream every streamAckInterval, so sync
// producers are not held back by a replica that is never idle.
func (a *applier) ackDue(more bool) bool {
	return a.streaming && ((!more && (a.pending || time.Since(a.lastAck) >= a.s.opts.HeartbeatInterval)) ||
		(a.pending && time.Since(a.lastAck) >= streamAckInterval))
}
