package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelmq/keel/sdk"
)

// stream sends committed log bytes from `from` on, heartbeats while idle,
// and metadata snapshots on their interval. It returns nil once ctx ends,
// and otherwise the error that ended the stream (a write, a read of the
// log, or a wait that failed for another reason than its bound).
//
// Cadence. Committed bytes are sent as soon as the stream sees them,
// without timers, with one exception that makes every round trip carry
// everything pending: while part of what was sent is not yet
// acknowledged, a batch smaller than BatchSize/2 waits for the replica's
// next acknowledgement (which it sends as soon as its input drains), then
// goes out with whatever was committed meanwhile. That costs at most the
// round trip already in progress, and turns a stream of tiny frames (one
// per commit, each with its own acknowledgement and its own release of
// waiting producers) into one frame per round trip. Batches of at least
// BatchSize/2 (a replica catching up) never wait, and neither does
// anything once HeartbeatInterval has passed since the last write.
func (m *master) stream(ctx context.Context, p *peer, from int64) error {
	s := &streamer{m: m, p: p, c: p.conn, rd: newLogReader(m.host), next: from, lastWrite: time.Now(),
		half: int64(m.opts.BatchSize / 2), hb: make([]byte, 0, DataHeaderSize), boundCancel: func() {}}
	defer func() { s.boundCancel() }()
	for ctx.Err() == nil {
		if err := s.syncMeta(ctx); err != nil {
			return err
		}
		committed := m.committed.Load()
		var err error
		switch {
		case s.next >= committed:
			err = s.idle(ctx)
		case s.gathering(committed):
			err = s.gather(ctx)
		default:
			err = s.send(ctx, committed)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// streamer is the state of one stream to one replica (see stream). Only
// the goroutine running stream uses it.
type streamer struct {
	m  *master
	p  *peer
	c  *Conn
	rd *logReader

	next      int64     // offset of the next byte to send
	half      int64     // BatchSize/2: batches below it are small
	lastWrite time.Time // when the last DATA or heartbeat frame was written
	lastMeta  time.Time // when the last metadata snapshot was taken
	metaSent  []byte    // the last metadata snapshot sent
	hb        []byte    // DATA headers, reused

	// bound is the context of every wait: it ends when the next heartbeat
	// or metadata snapshot is due. It is reused until it ends (the due
	// time only moves later), so a busy stream creates no timer per wait.
	bound       context.Context
	boundCancel context.CancelFunc
}

// waitBound returns the context of the next wait, which ends when the
// next heartbeat or metadata snapshot is due (or ctx ends).
func (s *streamer) waitBound(ctx context.Context) context.Context {
	if s.bound == nil || s.bound.Err() != nil {
		s.boundCancel()
		due := s.lastWrite.Add(s.m.opts.HeartbeatInterval)
		if md := s.lastMeta.Add(s.m.opts.SyncMetaInterval); md.Before(due) {
			due = md
		}
		s.bound, s.boundCancel = context.WithDeadline(ctx, due)
	}
	return s.bound
}

// syncMeta takes a metadata snapshot once SyncMetaInterval has passed
// since the last one, and sends it (unflushed) if it differs from the
// last one sent. A snapshot that fails or exceeds MaxFrameSize is logged
// and skipped; only a failed write is returned.
func (s *streamer) syncMeta(ctx context.Context) error {
	m := s.m
	if time.Since(s.lastMeta) < m.opts.SyncMetaInterval {
		return nil
	}
	s.lastMeta = time.Now()
	snap, err := m.host.MetaSnapshot(ctx)
	switch {
	case err != nil:
		m.log.Warn("HA: metadata snapshot failed", "err", err)
	case len(snap) > m.opts.MaxFrameSize:
		m.log.Error("HA: metadata snapshot larger than max_frame_size: not synced", "bytes", len(snap), "max_frame_size", m.opts.MaxFrameSize)
	case !bytes.Equal(snap, s.metaSent):
		if err := s.c.WriteFrame(false, FrameMeta, snap); err != nil {
			return err
		}
		s.metaSent = snap
	}
	return nil
}

// idle runs when everything committed was sent: it flushes the
// connection, then, unless a heartbeat or snapshot is due, waits for the
// log to grow until one is. It sends a heartbeat once HeartbeatInterval
// has passed since the last write. It returns nil when ctx ends during
// the wait (the caller's loop then stops).
func (s *streamer) idle(ctx context.Context) error {
	m := s.m
	if err := s.c.Flush(); err != nil {
		return err
	}
	if time.Since(s.lastWrite) < m.opts.HeartbeatInterval && time.Since(s.lastMeta) < m.opts.SyncMetaInterval {
		c2, err := m.host.WaitCommitted(s.waitBound(ctx), s.next)
		if err == nil {
			m.observe(c2)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, sdk.ErrTimeout) {
			return fmt.Errorf("wait for the log to grow: %w", err)
		}
	}
	if time.Since(s.lastWrite) >= m.opts.HeartbeatInterval {
		if err := s.c.WriteFrame(true, FrameHeartbeat, Heartbeat{Committed: m.committed.Load()}.Marshal()); err != nil {
			return err
		}
		s.lastWrite = time.Now()
	}
	return nil
}

// gathering reports whether the pending batch up to committed is small,
// a frame is in flight and no heartbeat is due: the batch then waits for
// the next acknowledgement (see gather).
func (s *streamer) gathering(committed int64) bool {
	return committed-s.next < s.half && s.p.sent.Load() > s.p.received.Load() &&
		time.Since(s.lastWrite) < s.m.opts.HeartbeatInterval
}

// gather lets a small batch gather what the next acknowledgement's round
// trip brings: it flushes and waits for an acknowledgement or the wait
// bound. What was committed meanwhile is learnt by the next round's
// send (which reads everything committed) or idle (whose wait returns at
// once when the log grew), without a call to the host here: across the
// process boundary a call is a round trip on every acknowledgement.
func (s *streamer) gather(ctx context.Context) error {
	if err := s.c.Flush(); err != nil {
		return err
	}
	select {
	case <-s.p.acked:
	case <-s.waitBound(ctx).Done():
	}
	return nil
}

// send reads up to BatchSize committed bytes at next, never across an
// epoch boundary, and sends them as one DATA frame; next and the peer's
// sent offset advance past them. A small batch is flushed at once (the
// replica is caught up and sync acknowledgements wait for it); a full one
// is left to coalesce in the buffer. An offset retention removed is
// refused to the replica (it reconnects) and returned as an error.
func (s *streamer) send(ctx context.Context, committed int64) error {
	m, next := s.m, s.next
	data, err := s.rd.read(ctx, next, m.opts.BatchSize)
	if err != nil {
		if errors.Is(err, sdk.ErrOffset) {
			s.c.SendError(CodeRefused, fmt.Sprintf("offset %d is no longer on this master (retention): reconnect", next))
		}
		return fmt.Errorf("read log at %d: %w", next, err)
	}
	if len(data) == 0 {
		if pos, err := m.host.Positions(ctx); err == nil && pos.Committed <= next {
			m.committed.Store(pos.Committed) // the log was cut back (cannot happen on a master)
		}
		return nil
	}
	e, boundary := m.epochAt(next)
	if boundary > next && next+int64(len(data)) > boundary {
		data = data[:boundary-next] // never across an epoch boundary
	}
	s.hb = DataHeader{Offset: next, Epoch: e.Epoch, EpochStart: e.StartOffset, Committed: committed}.appendTo(s.hb[:0])
	s.p.sent.Store(next + int64(len(data)))
	flush := int64(len(data)) < s.half
	if err := s.c.WriteFrame(flush, FrameData, s.hb, data); err != nil {
		return err
	}
	s.next += int64(len(data))
	m.n.met.bytesSent.Add(len(data))
	s.lastWrite = time.Now()
	return nil
}
