package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/internal/commitpage"
	"github.com/keelmq/keel/internal/pluginlane"
	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
)

// remoteHost is the Host an external plugin receives: every call goes to
// the host over its lane (package internal/pluginlane) when the host
// offered one and it connected, else over the brokered gRPC connection;
// the two carry the same service. WaitCommitted is answered without a
// call when it can: from the host's committed-offset page (package
// internal/commitpage, offered with a lane), else from a cached committed
// offset, kept by AwaitCommitted's answers over a lane, else by one
// WatchCommitted stream. Log lines are queued and sent in batches.
type remoteHost struct {
	conn    *grpc.ClientConn
	lane    *pluginlane.Conn   // nil: none
	files   *core.LogFiles     // the store's segment files, read here (nil: ReadLog calls)
	page    *commitpage.Reader // the host's committed offset, mapped (nil: none)
	reports *reporter
	c       pluginpb.HostClient
	ctx     context.Context // cancelled by close
	cancel  context.CancelFunc

	// committed offset watch
	wmu     sync.Mutex
	running bool          // the WatchCommitted stream is open (or opening)
	have    bool          // latest is valid
	latest  int64         // last committed offset the host sent
	gen     int           // bumped when the stream fails
	err     error         // why the stream last failed
	notify  chan struct{} // closed and replaced on every change
	closed  bool
	reset   bool               // the stream is being restarted (after a truncation)
	cutting int                // TruncateLog calls in progress: no segment file reads
	cuts    int                // TruncateLog calls begun, ever
	noAwait atomic.Bool        // the host answered AwaitCommitted Unimplemented
	wcancel context.CancelFunc // ends the current stream
	watchWG sync.WaitGroup

	// log queue
	lmu     sync.Mutex
	lines   []*pluginpb.LogLine
	lclosed bool
	lwake   chan struct{}
	ldone   chan struct{}
	dropped int
}

// maxQueuedLogLines bounds the Log queue; lines beyond it are dropped (and
// counted in the next line sent) rather than blocking the plugin.
const maxQueuedLogLines = 4096

// newRemoteHost calls the host over lane when it is not nil, else over
// conn; with files, ReadLog reads committed bytes itself; with page,
// WaitCommitted and those reads take the committed offset from it.
func newRemoteHost(conn *grpc.ClientConn, lane *pluginlane.Conn, files *core.LogFiles, page *commitpage.Reader) *remoteHost {
	ctx, cancel := context.WithCancel(context.Background())
	c := pluginpb.NewHostClient(conn)
	if lane != nil {
		c = pluginpb.NewHostClient(lane)
	}
	h := &remoteHost{
		conn: conn, lane: lane, files: files, page: page, c: c, ctx: ctx, cancel: cancel,
		notify: make(chan struct{}), lwake: make(chan struct{}, 1), ldone: make(chan struct{}),
	}
	h.reports = newReporter(h)
	go h.logLoop()
	return h
}

// close ends the watch stream, sends the queued log lines, and closes the
// connection. Waiters in WaitCommitted get ErrUnavailable.
func (h *remoteHost) close() {
	h.lmu.Lock()
	h.lclosed = true
	h.lmu.Unlock()
	select {
	case h.lwake <- struct{}{}:
	default:
	}
	select {
	case <-h.ldone:
	case <-time.After(2 * time.Second):
	}
	h.wmu.Lock()
	h.closed = true
	h.err = fmt.Errorf("host connection closed (plugin stopped): %w", ErrUnavailable)
	h.gen++
	h.changed()
	h.wmu.Unlock()
	h.cancel()
	h.watchWG.Wait()
	if h.lane != nil {
		_ = h.lane.Close()
	}
	if h.files != nil {
		_ = h.files.Close()
	}
	if h.page != nil {
		_ = h.page.Close()
	}
	_ = h.conn.Close()
}

// changed wakes every WaitCommitted waiter. h.wmu is held.
func (h *remoteHost) changed() {
	close(h.notify)
	h.notify = make(chan struct{})
}

func (h *remoteHost) Positions(ctx context.Context) (Positions, error) {
	p, err := h.c.Positions(ctx, &pluginpb.Empty{})
	if err != nil {
		return Positions{}, pluginwire.FromStatus(err)
	}
	return pluginwire.PositionsFromPB(p), nil
}

// FlushAfter implements FlushAfterer with one call to the host.
func (h *remoteHost) FlushAfter(ctx context.Context, after int64) (int64, error) {
	return pluginwire.OffsetResult(h.c.FlushAfter(ctx, &pluginpb.Offset{Offset: after}))
}

// WaitCommitted answers from the page or the cached committed offset when
// either exceeds after. Otherwise, over a lane, it asks the host with one
// AwaitCommitted call (answered the moment the offset grows, where the
// next watch message may still be spaced out), and caches the answer;
// without a lane, or from a host without AwaitCommitted, it waits for the
// watch.
func (h *remoteHost) WaitCommitted(ctx context.Context, after int64) (int64, error) {
	if h.lane != nil && !h.noAwait.Load() {
		h.wmu.Lock()
		if c, ok := h.pageLocked(); ok && c > after {
			h.wmu.Unlock()
			return c, nil
		}
		if h.have && h.latest > after {
			v := h.latest
			h.wmu.Unlock()
			return v, nil
		}
		cuts := h.cuts
		h.wmu.Unlock()
		r, err := h.c.AwaitCommitted(ctx, &pluginpb.Offset{Offset: after})
		if err == nil {
			h.wmu.Lock()
			// Cached only if no truncation began since the call did: the
			// answer may predate a cut.
			if h.cuts == cuts && h.cutting == 0 && (!h.have || r.GetOffset() > h.latest) {
				h.latest, h.have = r.GetOffset(), true
				h.changed()
			}
			h.wmu.Unlock()
			return r.GetOffset(), nil
		}
		if err = pluginwire.FromStatus(err); !errors.Is(err, ErrNotSupported) {
			return 0, err
		}
		h.noAwait.Store(true) // an older host: wait for the watch
	}
	h.wmu.Lock()
	gen := h.gen
	for {
		if h.have && h.latest > after {
			v := h.latest
			h.wmu.Unlock()
			return v, nil
		}
		if h.closed {
			err := h.err
			h.wmu.Unlock()
			if err == nil {
				err = fmt.Errorf("host connection closed: %w", ErrUnavailable)
			}
			return 0, err
		}
		if h.gen != gen {
			err := h.err
			h.wmu.Unlock()
			return 0, err
		}
		if !h.running {
			h.running = true
			wctx, cancel := context.WithCancel(h.ctx)
			h.wcancel = cancel
			h.watchWG.Add(1)
			go h.watch(wctx)
		}
		ch := h.notify
		h.wmu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		h.wmu.Lock()
	}
}

// pageLocked returns the page's committed offset; ok false without a
// page or while this plugin's TruncateLog runs (the page may still show
// the offset from before the cut). h.wmu is held.
func (h *remoteHost) pageLocked() (int64, bool) {
	if h.page == nil || h.cutting > 0 {
		return 0, false
	}
	return h.page.Load(), true
}

// watch runs the WatchCommitted stream until it fails, is reset, or the
// host closes.
func (h *remoteHost) watch(ctx context.Context) {
	defer h.watchWG.Done()
	err := h.follow(ctx)
	h.wmu.Lock()
	defer h.wmu.Unlock()
	h.running = false
	h.wcancel()
	if h.reset && !h.closed {
		// Restarted on purpose: waiters start a fresh stream.
		h.reset = false
		h.changed()
		return
	}
	if !h.closed {
		h.err = fmt.Errorf("watch committed offset: %w", pluginwire.FromStatus(err))
	}
	h.gen++
	h.changed()
}

// follow opens the WatchCommitted stream after the cached offset and keeps
// the cache current until the stream fails.
func (h *remoteHost) follow(ctx context.Context) error {
	h.wmu.Lock()
	after := int64(-1)
	if h.have {
		after = h.latest
	}
	h.wmu.Unlock()
	stream, err := h.c.WatchCommitted(ctx, &pluginpb.Offset{Offset: after})
	if err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		h.wmu.Lock()
		if ctx.Err() == nil && (!h.have || m.Offset > h.latest) {
			h.latest, h.have = m.Offset, true
			h.changed()
		}
		h.wmu.Unlock()
	}
}

func (h *remoteHost) Commit(ctx context.Context) (int64, error) {
	return pluginwire.OffsetResult(h.c.Commit(ctx, &pluginpb.Empty{}))
}

func (h *remoteHost) Flush(ctx context.Context) (int64, error) {
	return pluginwire.OffsetResult(h.c.Flush(ctx, &pluginpb.Empty{}))
}

// ReadLog reads the segment files itself when the host offered them and
// from is below the cached committed offset; otherwise,
// or when that read fails, it asks the host.
func (h *remoteHost) ReadLog(ctx context.Context, from int64, maxBytes int) ([]byte, error) {
	if b, ok := h.readFiles(from, maxBytes, nil); ok {
		return b, nil
	}
	return pluginwire.BytesResult(h.c.ReadLog(ctx, &pluginpb.ReadLogRequest{From: from, MaxBytes: int64(maxBytes)}))
}

// ReadLogInto is ReadLog into buf (replication.LogIntoReader's contract).
func (h *remoteHost) ReadLogInto(ctx context.Context, from int64, maxBytes int, buf []byte) ([]byte, error) {
	if b, ok := h.readFiles(from, maxBytes, buf); ok {
		return b, nil
	}
	b, err := h.ReadLog(ctx, from, maxBytes)
	return append(buf[:0], b...), err
}

// readFiles reads [from, the committed offset the page or the cache
// holds) from the segment files; ok false means ask the host (no files,
// nothing known committed above from, or the read failed).
func (h *remoteHost) readFiles(from int64, maxBytes int, buf []byte) ([]byte, bool) {
	if h.files == nil {
		return nil, false
	}
	h.wmu.Lock()
	committed, have, cutting, cuts := h.latest, h.have, h.cutting, h.cuts
	if c, ok := h.pageLocked(); ok && (!have || c > committed) {
		committed, have = c, true
	}
	h.wmu.Unlock()
	if !have || from >= committed || cutting > 0 {
		return nil, false
	}
	b, err := h.files.ReadInto(from, committed, maxBytes, buf)
	if err != nil {
		return nil, false
	}
	// A cut that began during the read may have replaced what it read.
	h.wmu.Lock()
	ok := h.cuts == cuts && h.cutting == 0
	h.wmu.Unlock()
	return b, ok
}

func (h *remoteHost) AppendLog(ctx context.Context, offset int64, data []byte) error {
	return pluginwire.EmptyResult(h.c.AppendLog(ctx, &pluginpb.AppendLogRequest{Offset: offset, Data: data}))
}

// TruncateLog also forgets the cached committed offset, which the
// truncation may have lowered: the next WaitCommitted starts a new stream.
// While it runs, and until a stream started after it brings an offset,
// ReadLog asks the host: no read of the segment files may go past the cut.
func (h *remoteHost) TruncateLog(ctx context.Context, offset int64) error {
	h.wmu.Lock()
	h.cutting++
	h.cuts++
	h.forgetCommitted()
	h.wmu.Unlock()
	if h.files != nil {
		h.files.Reset()
	}
	_, err := h.c.TruncateLog(ctx, &pluginpb.Offset{Offset: offset})
	if h.files != nil {
		h.files.Reset()
	}
	h.wmu.Lock()
	h.cutting--
	h.forgetCommitted() // a stream opened during the cut may hold an offset from before it
	h.wmu.Unlock()
	return pluginwire.FromStatus(err)
}

// forgetCommitted drops the cached committed offset and restarts the
// watch stream, whose messages in flight are then ignored. h.wmu is held.
func (h *remoteHost) forgetCommitted() {
	h.have = false
	if h.running {
		h.reset = true
		h.wcancel()
	}
}

func (h *remoteHost) ReadRecord(ctx context.Context, offset int64) ([]byte, error) {
	return pluginwire.BytesResult(h.c.ReadRecord(ctx, &pluginpb.Offset{Offset: offset}))
}

func (h *remoteHost) Epochs(ctx context.Context) ([]Epoch, error) {
	r, err := h.c.Epochs(ctx, &pluginpb.Empty{})
	if err != nil {
		return nil, pluginwire.FromStatus(err)
	}
	return pluginwire.EpochsFromPB(r), nil
}

func (h *remoteHost) SetEpochs(ctx context.Context, epochs []Epoch) error {
	return pluginwire.EmptyResult(h.c.SetEpochs(ctx, pluginwire.EpochsToPB(epochs)))
}

func (h *remoteHost) MetaSnapshot(ctx context.Context) ([]byte, error) {
	return pluginwire.BytesResult(h.c.MetaSnapshot(ctx, &pluginpb.Empty{}))
}

func (h *remoteHost) MetaApply(ctx context.Context, snapshot []byte) error {
	return pluginwire.EmptyResult(h.c.MetaApply(ctx, &pluginpb.Bytes{Data: snapshot}))
}

// ReportReplication: see reporter for when it returns before the host
// has the report.
func (h *remoteHost) ReportReplication(ctx context.Context, st ReplicationState) error {
	return h.reports.report(ctx, st)
}

// Log queues the line; a goroutine sends queued lines in batches. It never
// blocks: when the queue is full the line is dropped and the drop counted.
func (h *remoteHost) Log(ctx context.Context, level int, msg string, attrs map[string]string) {
	var a map[string]string
	if len(attrs) > 0 {
		a = make(map[string]string, len(attrs))
		for k, v := range attrs {
			a[k] = v
		}
	}
	h.lmu.Lock()
	if h.lclosed || len(h.lines) >= maxQueuedLogLines {
		h.dropped++
		h.lmu.Unlock()
		return
	}
	h.lines = append(h.lines, &pluginpb.LogLine{Level: int32(level), Msg: msg, Attrs: a})
	h.lmu.Unlock()
	select {
	case h.lwake <- struct{}{}:
	default:
	}
}

func (h *remoteHost) logLoop() {
	defer close(h.ldone)
	for {
		<-h.lwake
		h.lmu.Lock()
		lines, dropped, closed := h.lines, h.dropped, h.lclosed
		h.lines, h.dropped = nil, 0
		h.lmu.Unlock()
		if dropped > 0 {
			lines = append(lines, &pluginpb.LogLine{Level: int32(slog.LevelWarn), Msg: "plugin log lines dropped (queue full)",
				Attrs: map[string]string{"dropped": fmt.Sprint(dropped)}})
		}
		if len(lines) > 0 {
			ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
			_, _ = h.c.Log(ctx, &pluginpb.LogBatch{Lines: lines})
			cancel()
		}
		if closed {
			return
		}
	}
}
