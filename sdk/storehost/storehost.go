// Package storehost implements sdk.Host in-process over a *core.Store, and
// keeps what the host needs to release producers' acks: the replication
// state replicators report and the fence they may raise.
//
// The host process uses it directly; the gRPC glue serves it to external
// plugins; sdk/plugintest runs conformance suites against it.
package storehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/epoch"
	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/internal/offwait"
	"github.com/keelmq/keel/sdk"
)

// Host is an sdk.Host over a store. It also implements core.ConfirmSource
// (the replicated offset) for stores whose consumers see only replicated
// data.
type Host struct {
	store  *core.Store
	log    *slog.Logger
	mu     sync.Mutex
	state  sdk.ReplicationState
	acked  atomic.Int64
	fenced atomic.Bool
	// onFence, when set, is called after every report that changes the
	// fence (on or off, or its reason).
	onFence func()
	// replWait holds WaitReplicated callers by offset: a report wakes
	// only those it covers (waking all on every report cost the sync
	// replication benchmark most of its scheduler time).
	replWait offwait.Waiters
}

var (
	_ sdk.Host         = (*Host)(nil)
	_ sdk.FlushAfterer = (*Host)(nil)
)

// New returns a Host for store. log receives plugin log lines.
func New(store *core.Store, log *slog.Logger) *Host {
	if log == nil {
		log = slog.Default()
	}
	return &Host{store: store, log: log}
}

// SetStore attaches the store when it was opened after New (the store's
// options may name this Host as their ConfirmSource). It must be called
// before any plugin starts.
func (h *Host) SetStore(s *core.Store) { h.store = s }

// Store is the underlying store.
func (h *Host) Store() *core.Store { return h.store }

// Positions implements sdk.Host.
// LogLocation is the store's core.Store.LogLocation: where an external
// plugin on this machine may read committed segment bytes itself.
func (h *Host) LogLocation() (dir string, segmentSize int64, ok bool) {
	return h.store.LogLocation()
}

// MirrorCommitted is the store's core.Store.MirrorCommitted: an external
// plugin's committed-offset page is kept with it.
func (h *Host) MirrorCommitted(fn func(committed int64)) (stop func()) {
	return h.store.MirrorCommitted(fn)
}

func (h *Host) Positions(ctx context.Context) (sdk.Positions, error) {
	return h.store.Positions(), nil
}

// WaitCommitted implements sdk.Host.
func (h *Host) WaitCommitted(ctx context.Context, after int64) (int64, error) {
	c, err := h.store.WaitCommitted(ctx, after)
	return c, mapErr(err)
}

// Commit implements sdk.Host.
func (h *Host) Commit(ctx context.Context) (int64, error) {
	c, err := h.store.Commit()
	return c, mapErr(err)
}

// Flush implements sdk.Host.
func (h *Host) Flush(ctx context.Context) (int64, error) {
	f, err := h.store.Flush()
	return f, mapErr(err)
}

// ReadLog implements sdk.Host.
func (h *Host) ReadLog(ctx context.Context, from int64, maxBytes int) ([]byte, error) {
	b, err := h.store.ReadLog(from, maxBytes)
	return b, mapErr(err)
}

// ReadLogInto is ReadLog into buf (replication.LogIntoReader): the bytes
// are copied into buf[:0], which grows only when its capacity is too
// small, so a stream reusing its buffer allocates nothing per batch.
func (h *Host) ReadLogInto(ctx context.Context, from int64, maxBytes int, buf []byte) ([]byte, error) {
	b, err := h.store.ReadLogInto(from, maxBytes, buf)
	return b, mapErr(err)
}

// AppendLog implements sdk.Host.
func (h *Host) AppendLog(ctx context.Context, offset int64, data []byte) error {
	return mapErr(h.store.AppendRaw(offset, data))
}

// TruncateLog implements sdk.Host.
func (h *Host) TruncateLog(ctx context.Context, offset int64) error {
	return mapErr(h.store.Truncate(offset))
}

// ReadRecord implements sdk.Host.
func (h *Host) ReadRecord(ctx context.Context, offset int64) ([]byte, error) {
	b, err := h.store.ReadRecord(offset)
	return b, mapErr(err)
}

// Epochs implements sdk.Host.
func (h *Host) Epochs(ctx context.Context) ([]sdk.Epoch, error) {
	es := h.store.Epochs().Entries()
	out := make([]sdk.Epoch, len(es))
	for i, e := range es {
		out[i] = sdk.Epoch{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out, nil
}

// SetEpochs implements sdk.Host.
func (h *Host) SetEpochs(ctx context.Context, epochs []sdk.Epoch) error {
	cur := h.store.Epochs().Entries()
	es := make([]epoch.Entry, len(epochs))
	for i, e := range epochs {
		es[i] = epoch.Entry{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	if len(es) == len(cur)+1 && equalPrefix(cur, es) {
		return h.store.Epochs().Append(es[len(es)-1])
	}
	return h.store.Epochs().Reset(es)
}

func equalPrefix(a, b []epoch.Entry) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// MetaSnapshot implements sdk.Host.
func (h *Host) MetaSnapshot(ctx context.Context) ([]byte, error) {
	return json.Marshal(h.store.Meta().Snapshot())
}

// MetaApply implements sdk.Host.
func (h *Host) MetaApply(ctx context.Context, snapshot []byte) error {
	var s meta.Snapshot
	if err := json.Unmarshal(snapshot, &s); err != nil {
		return fmt.Errorf("decode metadata snapshot: %w", err)
	}
	if err := h.store.Meta().Apply(s); err != nil {
		return err
	}
	// Persist now: a slave promoted after its master died must not lose
	// the offsets it merged since the last periodic persist.
	return h.store.Meta().PersistAll()
}

// ReportReplication implements sdk.Host.
func (h *Host) ReportReplication(ctx context.Context, st sdk.ReplicationState) error {
	h.mu.Lock()
	if st.AckedOffset < h.state.AckedOffset {
		st.AckedOffset = h.state.AckedOffset // never decreases
	}
	fenceChanged := st.Fenced != h.state.Fenced || (st.Fenced && st.Reason != h.state.Reason)
	h.state = st
	h.acked.Store(st.AckedOffset)
	h.fenced.Store(st.Fenced)
	onFence := h.onFence
	h.mu.Unlock()
	h.replWait.Release(st.AckedOffset)
	h.store.NotifyConfirm()
	if fenceChanged && onFence != nil {
		onFence()
	}
	return nil
}

// Log implements sdk.Host.
func (h *Host) Log(ctx context.Context, level int, msg string, attrs map[string]string) {
	args := make([]any, 0, 2*len(attrs))
	for k, v := range attrs {
		args = append(args, k, v)
	}
	h.log.Log(ctx, slog.Level(level), msg, args...)
}

// ConfirmOffset implements core.ConfirmSource: the replicated offset.
func (h *Host) ConfirmOffset() int64 { return h.acked.Load() }

// Replication returns the last reported replication state.
func (h *Host) Replication() sdk.ReplicationState {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state
	st.Replicas = append([]sdk.ReplicaState(nil), st.Replicas...)
	return st
}

// OnFenceChange makes fn run after each ReportReplication that raises or
// lifts the write fence or changes its reason, on the reporting goroutine,
// after the new state is visible to Fenced. fn must be quick. It replaces
// any earlier fn; set it before the replication plugin starts.
func (h *Host) OnFenceChange(fn func()) {
	h.mu.Lock()
	h.onFence = fn
	h.mu.Unlock()
}

// Fenced reports whether a replicator asked the host to refuse writes.
func (h *Host) Fenced() (bool, string) {
	if !h.fenced.Load() {
		return false, ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return true, h.state.Reason
}

// WaitReplicated blocks until the acknowledged offset (the replication
// state's AckedOffset, which never decreases) reaches off, or ctx ends
// (ctx's error). Callers check the in-sync count themselves (InSync).
func (h *Host) WaitReplicated(ctx context.Context, off int64) error {
	return h.replWait.Wait(ctx, off, func() bool { return h.acked.Load() >= off }, nil)
}

// FlushAfter implements sdk.FlushAfterer.
func (h *Host) FlushAfter(ctx context.Context, after int64) (int64, error) {
	return sdk.WaitThenFlush(ctx, h, after)
}

// OnReplicated calls fn(true) once the acknowledged offset reaches off, or
// fn(false) after timeout. fn runs exactly once, at once on the caller's
// goroutine when off is already acknowledged, otherwise on the goroutine
// that reports replication (or a timer's), so it must be quick and must
// not block. It is WaitReplicated without a goroutine per waiter.
func (h *Host) OnReplicated(off int64, timeout time.Duration, fn func(ok bool)) {
	h.replWait.Notify(off, timeout, func() bool { return h.acked.Load() >= off }, fn)
}

// InSync is the number of in-sync replicas last reported.
func (h *Host) InSync() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state.InSync
}

// mapErr maps core errors onto the sdk sentinels while keeping the text.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, core.ErrOffset):
		return fmt.Errorf("%w: %w", sdk.ErrOffset, err)
	case errors.Is(err, core.ErrClosed), errors.Is(err, core.ErrReadOnly), errors.Is(err, core.ErrDiskFull):
		return fmt.Errorf("%w: %w", sdk.ErrUnavailable, err)
	}
	return err
}

// Listener adapts an sdk.Indexer to core.DispatchListener. sdk.Record is
// core.DispatchRecord, so each batch goes to the indexer as the store
// passes it, without a copy, unless Unindexed picks records out of it.
type Listener struct {
	Indexer sdk.Indexer
	// Unindexed, if set, names the topics whose records the indexer is
	// to see without keys: such a record reaches Index in its place in
	// the batch (so the indexer's progress covers it) with empty Keys
	// and UniqKey, and so gets no index entry. A batch holding one is
	// copied into a buffer of the Listener's (Dispatch is called only by
	// the store's dispatcher goroutine).
	Unindexed func(topic string) bool
	buf       []core.DispatchRecord
}

var _ core.DispatchListener = (*Listener)(nil)

// Dispatch implements core.DispatchListener.
func (l *Listener) Dispatch(batch []core.DispatchRecord) error {
	if l.Unindexed != nil {
		batch = l.withoutKeys(batch)
	}
	return l.Indexer.Index(context.Background(), batch)
}

// withoutKeys is batch with the keys of Unindexed topics' records
// cleared: batch itself when it has none, else a copy in l.buf.
func (l *Listener) withoutKeys(batch []core.DispatchRecord) []core.DispatchRecord {
	copied, have, skip := false, false, false
	var topic string // the last topic asked about, when have
	for i := range batch {
		r := &batch[i]
		if r.Keys == "" && r.UniqKey == "" {
			continue
		}
		if !have || r.Topic != topic {
			topic, skip, have = r.Topic, l.Unindexed(r.Topic), true
		}
		if !skip {
			continue
		}
		if !copied {
			l.buf = append(l.buf[:0], batch...)
			batch, copied = l.buf, true
		}
		batch[i].Keys, batch[i].UniqKey = "", ""
	}
	return batch
}

// Sync implements core.DispatchListener.
func (l *Listener) Sync() error { return l.Indexer.Sync(context.Background()) }

// ApplyFlushPolicy sets the store options a flush strategy's policy needs:
// consumers limited to flushed data when it says so; a write buffer when it
// asks for one (64 MiB, or four maximum-size messages if more; a
// WriteBuffer already set is kept); and, when acks wait for fdatasync and
// no write buffer was asked for, a small buffer with CommitOnWait, so
// that appends reach the segment with one pwrite(2) per flush round instead
// of through the mapping (see core.Options.CommitOnWait).
func ApplyFlushPolicy(o *core.Options, fp sdk.FlushPolicy) {
	o.VisibleAfterFlush = fp.VisibleAfterFlush
	maxMsg := o.MaxMessageSize
	if maxMsg <= 0 {
		maxMsg = core.DefaultMaxMessageSize
	}
	room := 4 * (maxMsg + 4096)
	switch {
	case fp.WriteBuffer:
		if o.WriteBuffer <= 0 {
			o.WriteBuffer = max(64<<20, room)
		}
	case fp.WaitFlush:
		if o.WriteBuffer <= 0 {
			o.WriteBuffer = max(8<<20, room)
		}
		o.CommitOnWait = true
	}
}
