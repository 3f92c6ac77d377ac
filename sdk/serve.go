package sdk

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/keelmq/keel/sdk/internal/pluginpb"
	"github.com/keelmq/keel/sdk/internal/rpcerr"
)

// Handshake is the go-plugin handshake between keel hosts and plugin
// binaries: the protocol version is Version, and the magic cookie (a UX
// guard against running a plugin binary by hand, not a security measure)
// never changes.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  Version,
	MagicCookieKey:   "KEEL_PLUGIN",
	MagicCookieValue: "7f3c9e1a-keel-storage-plugin",
}

// go-plugin plugin names. basePluginName is served by every binary; the
// others are served when the value given to Serve implements that kind.
const basePluginName = "keel"

// errTable maps the sdk sentinels (and the context errors) onto gRPC codes
// and wire names. The names are part of the protocol: never change them.
var errTable = rpcerr.Table{
	{Name: "unavailable", Err: ErrUnavailable, Code: codes.Unavailable},
	{Name: "timeout", Err: ErrTimeout, Code: codes.DeadlineExceeded},
	{Name: "invalid_config", Err: ErrInvalidConfig, Code: codes.InvalidArgument},
	{Name: "offset", Err: ErrOffset, Code: codes.OutOfRange},
	{Name: "not_supported", Err: ErrNotSupported, Code: codes.Unimplemented},
	{Name: "fenced", Err: ErrFenced, Code: codes.FailedPrecondition},
	{Name: "context_canceled", Err: context.Canceled, Code: codes.Canceled},
	{Name: "context_deadline", Err: context.DeadlineExceeded, Code: codes.DeadlineExceeded},
}

func toStatus(err error) error   { return errTable.ToStatus(err) }
func fromStatus(err error) error { return errTable.FromStatus(err) }

// maxMsg lifts gRPC's 4 MiB default message limit: ReadLog and AppendLog
// carry up to a segment's worth of bytes when asked to.
const maxMsg = math.MaxInt32

// Serve serves p as an external plugin over hashicorp/go-plugin with gRPC
// and does not return while the host keeps the plugin running (go-plugin
// exits the process when the host closes it). Call it from a plugin
// binary's main:
//
//	func main() { sdk.Serve(myplugin.New()) }
//
// The binary serves every plugin kind p implements (FlushStrategy,
// Replicator, Indexer) and the optional interfaces it implements
// (StatusReporter, MetricsWriter, Promoter, ForceWriter); the host learns
// which at connect time. A binary serving several kinds shares the one
// value p among them: the host calls Configure, Start and Stop once per kind
// it uses.
//
// Logging: Serve points slog's default logger at stderr in hclog's JSON
// form, which the host re-emits into its own slog logger at each line's
// level (keys and values kept). Host.Log does the same through the host
// connection. Other output to stdout and stderr reaches the host's log at
// debug level.
//
// Run by hand (without the host's handshake cookie) it prints that it is a
// plugin and exits with status 1.
func Serve(p Plugin) {
	stderr := os.Stderr // go-plugin replaces os.Stderr with a pipe once serving
	slog.SetDefault(slog.New(NewPluginLogHandler(stderr, slog.LevelDebug)))
	srv := &pluginServer{p: p, hosts: map[Kind]*remoteHost{}}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         srv.pluginSet(),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return plugin.DefaultGRPCServer(append(opts, grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg)))
		},
		Logger: hclog.New(&hclog.LoggerOptions{Name: "go-plugin", Output: stderr, JSONFormat: true, Level: hclog.Info}),
	})
}

// NewPluginLogHandler returns a slog.Handler writing hclog's JSON line
// format (@level, @message, @timestamp, then the attributes), which the
// host's go-plugin client parses from a plugin's stderr and forwards into
// the host's slog logger at the same level. Serve installs one as the
// default logger; it is exported for plugins that build their own loggers.
func NewPluginLogHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				if t, ok := a.Value.Any().(time.Time); ok {
					return slog.String("@timestamp", t.Format("2006-01-02T15:04:05.000000Z07:00"))
				}
			case slog.LevelKey:
				if l, ok := a.Value.Any().(slog.Level); ok {
					return slog.String("@level", hclogLevelName(l))
				}
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	})
}

func hclogLevelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "trace"
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

// ---------------------------------------------------------------- go-plugin glue

// grpcPlugin is one go-plugin plugin: the base service (kind "") or one
// plugin kind. On the plugin side srv is set; on the host side GRPCClient
// hands back the connection.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	kind Kind
	srv  *pluginServer
}

// dispensed is what the host side gets from Dispense: the connection to
// the plugin process, its broker and the context go-plugin cancels when the
// process exits.
type dispensed struct {
	done   context.Context
	broker *plugin.GRPCBroker
	conn   *grpc.ClientConn
}

func (g *grpcPlugin) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	g.srv.setBroker(b)
	switch g.kind {
	case "":
		pluginpb.RegisterPluginServer(s, &baseServer{srv: g.srv})
	case KindFlush:
		pluginpb.RegisterFlushStrategyServer(s, &flushServer{srv: g.srv})
	case KindReplication:
		pluginpb.RegisterReplicatorServer(s, &replicatorServer{srv: g.srv})
	case KindIndex:
		pluginpb.RegisterIndexerServer(s, &indexerServer{srv: g.srv})
	default:
		return fmt.Errorf("keel plugin: unknown kind %q", g.kind)
	}
	return nil
}

func (g *grpcPlugin) GRPCClient(ctx context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &dispensed{done: ctx, broker: b, conn: c}, nil
}

// kinds lists the kinds p implements, in a fixed order.
func kindsOf(p Plugin) []Kind {
	var ks []Kind
	if _, ok := p.(FlushStrategy); ok {
		ks = append(ks, KindFlush)
	}
	if _, ok := p.(Replicator); ok {
		ks = append(ks, KindReplication)
	}
	if _, ok := p.(Indexer); ok {
		ks = append(ks, KindIndex)
	}
	return ks
}

// ---------------------------------------------------------------- plugin side

// pluginServer serves one Plugin value to the host.
type pluginServer struct {
	p      Plugin
	mu     sync.Mutex
	broker *plugin.GRPCBroker
	hosts  map[Kind]*remoteHost // started kinds
}

func (s *pluginServer) pluginSet() plugin.PluginSet {
	set := plugin.PluginSet{basePluginName: &grpcPlugin{srv: s}}
	for _, k := range kindsOf(s.p) {
		set[string(k)] = &grpcPlugin{kind: k, srv: s}
	}
	return set
}

func (s *pluginServer) setBroker(b *plugin.GRPCBroker) {
	s.mu.Lock()
	s.broker = b
	s.mu.Unlock()
}

func (s *pluginServer) configure(ctx context.Context, kind Kind, req *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	if err := s.p.Configure(ctx, configFromPB(req.GetConfig())); err != nil {
		return nil, toStatus(err)
	}
	resp := &pluginpb.ConfigureResponse{}
	switch kind {
	case KindFlush:
		resp.Flush = flushPolicyToPB(s.p.(FlushStrategy).AckPolicy())
	case KindReplication:
		resp.Replication = replicationPolicyToPB(s.p.(Replicator).AckPolicy())
	}
	return resp, nil
}

func (s *pluginServer) start(ctx context.Context, kind Kind, req *pluginpb.StartRequest) (*pluginpb.Empty, error) {
	s.mu.Lock()
	b := s.broker
	_, running := s.hosts[kind]
	s.mu.Unlock()
	if running {
		return nil, toStatus(fmt.Errorf("start %s plugin: already started", kind))
	}
	conn, err := b.DialWithOptions(req.GetHostBrokerId(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)))
	if err != nil {
		return nil, toStatus(fmt.Errorf("start %s plugin: dial host callbacks: %w: %w", kind, ErrUnavailable, err))
	}
	h := newRemoteHost(conn)
	if err := s.p.Start(ctx, h); err != nil {
		h.close()
		return nil, toStatus(err)
	}
	s.mu.Lock()
	s.hosts[kind] = h
	s.mu.Unlock()
	return &pluginpb.Empty{}, nil
}

func (s *pluginServer) stop(ctx context.Context, kind Kind) (*pluginpb.Empty, error) {
	err := s.p.Stop(ctx)
	s.mu.Lock()
	h := s.hosts[kind]
	delete(s.hosts, kind)
	s.mu.Unlock()
	if h != nil {
		h.close()
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

type baseServer struct {
	pluginpb.UnimplementedPluginServer
	srv *pluginServer
}

func (b *baseServer) Describe(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Description, error) {
	p := b.srv.p
	d := &pluginpb.Description{SdkVersion: Version, Pid: int64(os.Getpid())}
	for _, k := range kindsOf(p) {
		d.Kinds = append(d.Kinds, string(k))
	}
	_, d.Status = p.(StatusReporter)
	_, d.Metrics = p.(MetricsWriter)
	_, d.Promote = p.(Promoter)
	_, d.ForceWrites = p.(ForceWriter)
	return d, nil
}

func (b *baseServer) Status(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Bytes, error) {
	sr, ok := b.srv.p.(StatusReporter)
	if !ok {
		return nil, toStatus(fmt.Errorf("plugin status: %w", ErrNotSupported))
	}
	data, err := sr.Status(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Bytes{Data: data}, nil
}

func (b *baseServer) WriteMetrics(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Bytes, error) {
	mw, ok := b.srv.p.(MetricsWriter)
	if !ok {
		return nil, toStatus(fmt.Errorf("plugin metrics: %w", ErrNotSupported))
	}
	data, err := mw.WriteMetrics(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Bytes{Data: data}, nil
}

type flushServer struct {
	pluginpb.UnimplementedFlushStrategyServer
	srv *pluginServer
}

func (f *flushServer) Configure(ctx context.Context, r *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	return f.srv.configure(ctx, KindFlush, r)
}
func (f *flushServer) Start(ctx context.Context, r *pluginpb.StartRequest) (*pluginpb.Empty, error) {
	return f.srv.start(ctx, KindFlush, r)
}
func (f *flushServer) Stop(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Empty, error) {
	return f.srv.stop(ctx, KindFlush)
}

type replicatorServer struct {
	pluginpb.UnimplementedReplicatorServer
	srv *pluginServer
}

func (r *replicatorServer) Configure(ctx context.Context, req *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	return r.srv.configure(ctx, KindReplication, req)
}
func (r *replicatorServer) Start(ctx context.Context, req *pluginpb.StartRequest) (*pluginpb.Empty, error) {
	return r.srv.start(ctx, KindReplication, req)
}
func (r *replicatorServer) Stop(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Empty, error) {
	return r.srv.stop(ctx, KindReplication)
}

func (r *replicatorServer) Promote(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.EpochNumber, error) {
	pr, ok := r.srv.p.(Promoter)
	if !ok {
		return nil, toStatus(fmt.Errorf("promote: %w", ErrNotSupported))
	}
	e, err := pr.Promote(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.EpochNumber{Epoch: e}, nil
}

func (r *replicatorServer) ForceWrites(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Empty, error) {
	fw, ok := r.srv.p.(ForceWriter)
	if !ok {
		return nil, toStatus(fmt.Errorf("force writes: %w", ErrNotSupported))
	}
	if err := fw.ForceWrites(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

type indexerServer struct {
	pluginpb.UnimplementedIndexerServer
	srv *pluginServer
}

func (x *indexerServer) Configure(ctx context.Context, r *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	return x.srv.configure(ctx, KindIndex, r)
}
func (x *indexerServer) Start(ctx context.Context, r *pluginpb.StartRequest) (*pluginpb.Empty, error) {
	return x.srv.start(ctx, KindIndex, r)
}
func (x *indexerServer) Stop(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Empty, error) {
	return x.srv.stop(ctx, KindIndex)
}

func (x *indexerServer) Index(ctx context.Context, r *pluginpb.IndexRequest) (*pluginpb.Empty, error) {
	batch := make([]Record, len(r.GetRecords()))
	for i, rec := range r.GetRecords() {
		batch[i] = recordFromPB(rec)
	}
	if err := x.srv.p.(Indexer).Index(ctx, batch); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

func (x *indexerServer) Sync(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Empty, error) {
	if err := x.srv.p.(Indexer).Sync(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

func (x *indexerServer) Query(ctx context.Context, r *pluginpb.QueryRequest) (*pluginpb.Offsets, error) {
	q := Query{Topic: r.GetTopic(), Key: r.GetKey(), Begin: r.GetBegin(), End: r.GetEnd(), Max: int(min(r.GetMax(), math.MaxInt32))}
	offs, err := x.srv.p.(Indexer).Query(ctx, q)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Offsets{Offsets: offs}, nil
}

// ---------------------------------------------------------------- plugin-side Host

// remoteHost is the Host an external plugin receives: every call goes over
// one brokered connection to the host. WaitCommitted is answered from a
// cached committed offset that one server stream keeps current, and Log
// lines are queued and sent in batches.
type remoteHost struct {
	conn   *grpc.ClientConn
	c      pluginpb.HostClient
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc

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

func newRemoteHost(conn *grpc.ClientConn) *remoteHost {
	ctx, cancel := context.WithCancel(context.Background())
	h := &remoteHost{
		conn: conn, c: pluginpb.NewHostClient(conn), ctx: ctx, cancel: cancel,
		notify: make(chan struct{}), lwake: make(chan struct{}, 1), ldone: make(chan struct{}),
	}
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
	close(h.notify)
	h.notify = make(chan struct{})
	h.wmu.Unlock()
	h.cancel()
	h.watchWG.Wait()
	_ = h.conn.Close()
}

func (h *remoteHost) Positions(ctx context.Context) (Positions, error) {
	p, err := h.c.Positions(ctx, &pluginpb.Empty{})
	if err != nil {
		return Positions{}, fromStatus(err)
	}
	return Positions{Min: p.Min, Dispatched: p.Dispatched, Confirm: p.Confirm, Flushed: p.Flushed, Committed: p.Committed, Epoch: p.Epoch}, nil
}

// FlushAfter implements FlushAfterer with one call to the host.
func (h *remoteHost) FlushAfter(ctx context.Context, after int64) (int64, error) {
	r, err := h.c.FlushAfter(ctx, &pluginpb.Offset{Offset: after})
	if err != nil {
		return 0, fromStatus(err)
	}
	return r.GetOffset(), nil
}

func (h *remoteHost) WaitCommitted(ctx context.Context, after int64) (int64, error) {
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

// watch runs the WatchCommitted stream until it fails, is reset, or the
// host closes.
func (h *remoteHost) watch(ctx context.Context) {
	defer h.watchWG.Done()
	err := func() error {
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
				close(h.notify)
				h.notify = make(chan struct{})
			}
			h.wmu.Unlock()
		}
	}()
	h.wmu.Lock()
	h.running = false
	h.wcancel()
	if h.reset && !h.closed {
		// Restarted on purpose: waiters start a fresh stream.
		h.reset = false
		close(h.notify)
		h.notify = make(chan struct{})
		h.wmu.Unlock()
		return
	}
	if !h.closed {
		h.err = fmt.Errorf("watch committed offset: %w", fromStatus(err))
	}
	h.gen++
	close(h.notify)
	h.notify = make(chan struct{})
	h.wmu.Unlock()
}

func (h *remoteHost) Commit(ctx context.Context) (int64, error) {
	r, err := h.c.Commit(ctx, &pluginpb.Empty{})
	if err != nil {
		return 0, fromStatus(err)
	}
	return r.Offset, nil
}

func (h *remoteHost) Flush(ctx context.Context) (int64, error) {
	r, err := h.c.Flush(ctx, &pluginpb.Empty{})
	if err != nil {
		return 0, fromStatus(err)
	}
	return r.Offset, nil
}

func (h *remoteHost) ReadLog(ctx context.Context, from int64, maxBytes int) ([]byte, error) {
	r, err := h.c.ReadLog(ctx, &pluginpb.ReadLogRequest{From: from, MaxBytes: int64(maxBytes)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return r.Data, nil
}

func (h *remoteHost) AppendLog(ctx context.Context, offset int64, data []byte) error {
	_, err := h.c.AppendLog(ctx, &pluginpb.AppendLogRequest{Offset: offset, Data: data})
	return fromStatus(err)
}

// TruncateLog also forgets the cached committed offset, which the
// truncation may have lowered: the next WaitCommitted starts a new stream.
func (h *remoteHost) TruncateLog(ctx context.Context, offset int64) error {
	_, err := h.c.TruncateLog(ctx, &pluginpb.Offset{Offset: offset})
	if err == nil {
		h.wmu.Lock()
		h.have = false
		if h.running {
			h.reset = true
			h.wcancel()
		}
		h.wmu.Unlock()
	}
	return fromStatus(err)
}

func (h *remoteHost) ReadRecord(ctx context.Context, offset int64) ([]byte, error) {
	r, err := h.c.ReadRecord(ctx, &pluginpb.Offset{Offset: offset})
	if err != nil {
		return nil, fromStatus(err)
	}
	return r.Data, nil
}

func (h *remoteHost) Epochs(ctx context.Context) ([]Epoch, error) {
	r, err := h.c.Epochs(ctx, &pluginpb.Empty{})
	if err != nil {
		return nil, fromStatus(err)
	}
	return epochsFromPB(r), nil
}

func (h *remoteHost) SetEpochs(ctx context.Context, epochs []Epoch) error {
	_, err := h.c.SetEpochs(ctx, epochsToPB(epochs))
	return fromStatus(err)
}

func (h *remoteHost) MetaSnapshot(ctx context.Context) ([]byte, error) {
	r, err := h.c.MetaSnapshot(ctx, &pluginpb.Empty{})
	if err != nil {
		return nil, fromStatus(err)
	}
	return r.Data, nil
}

func (h *remoteHost) MetaApply(ctx context.Context, snapshot []byte) error {
	_, err := h.c.MetaApply(ctx, &pluginpb.Bytes{Data: snapshot})
	return fromStatus(err)
}

func (h *remoteHost) ReportReplication(ctx context.Context, st ReplicationState) error {
	_, err := h.c.ReportReplication(ctx, replicationStateToPB(st))
	return fromStatus(err)
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

// ---------------------------------------------------------------- conversions

func configToPB(c Config) *pluginpb.Config {
	return &pluginpb.Config{Name: c.Name, File: c.File, Document: c.Document, Section: c.Section, Role: c.Role,
		DataDir: c.DataDir, Addr: c.Addr, PeerAddr: c.PeerAddr, Secret: c.Secret}
}

func configFromPB(c *pluginpb.Config) Config {
	return Config{Name: c.GetName(), File: c.GetFile(), Document: c.GetDocument(), Section: c.GetSection(), Role: c.GetRole(),
		DataDir: c.GetDataDir(), Addr: c.GetAddr(), PeerAddr: c.GetPeerAddr(), Secret: c.GetSecret()}
}

func flushPolicyToPB(p FlushPolicy) *pluginpb.FlushPolicy {
	return &pluginpb.FlushPolicy{WaitFlush: p.WaitFlush, TimeoutNanos: int64(p.Timeout), VisibleAfterFlush: p.VisibleAfterFlush, WriteBuffer: p.WriteBuffer}
}

func flushPolicyFromPB(p *pluginpb.FlushPolicy) FlushPolicy {
	return FlushPolicy{WaitFlush: p.GetWaitFlush(), Timeout: time.Duration(p.GetTimeoutNanos()), VisibleAfterFlush: p.GetVisibleAfterFlush(), WriteBuffer: p.GetWriteBuffer()}
}

func replicationPolicyToPB(p ReplicationPolicy) *pluginpb.ReplicationPolicy {
	return &pluginpb.ReplicationPolicy{WaitReplicas: int32(p.WaitReplicas), TimeoutNanos: int64(p.Timeout), VisibleAfterReplicated: p.VisibleAfterReplicated}
}

func replicationPolicyFromPB(p *pluginpb.ReplicationPolicy) ReplicationPolicy {
	return ReplicationPolicy{WaitReplicas: int(p.GetWaitReplicas()), Timeout: time.Duration(p.GetTimeoutNanos()), VisibleAfterReplicated: p.GetVisibleAfterReplicated()}
}

func recordToPB(r *Record) *pluginpb.Record {
	return &pluginpb.Record{Topic: r.Topic, QueueId: r.QueueID, QueueOffset: r.QueueOffset, PhysOffset: r.PhysOffset, Size: r.Size,
		TagsCode: r.TagsCode, StoreTimestamp: r.StoreTimestamp, SysFlag: r.SysFlag, Keys: r.Keys, UniqKey: r.UniqKey}
}

func recordFromPB(r *pluginpb.Record) Record {
	return Record{Topic: r.GetTopic(), QueueID: r.GetQueueId(), QueueOffset: r.GetQueueOffset(), PhysOffset: r.GetPhysOffset(), Size: r.GetSize(),
		TagsCode: r.GetTagsCode(), StoreTimestamp: r.GetStoreTimestamp(), SysFlag: r.GetSysFlag(), Keys: r.GetKeys(), UniqKey: r.GetUniqKey()}
}

func epochsToPB(es []Epoch) *pluginpb.EpochList {
	out := &pluginpb.EpochList{Epochs: make([]*pluginpb.Epoch, len(es))}
	for i, e := range es {
		out.Epochs[i] = &pluginpb.Epoch{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

func epochsFromPB(l *pluginpb.EpochList) []Epoch {
	out := make([]Epoch, len(l.GetEpochs()))
	for i, e := range l.GetEpochs() {
		out[i] = Epoch{Epoch: e.GetEpoch(), StartOffset: e.GetStartOffset()}
	}
	return out
}

func replicationStateToPB(st ReplicationState) *pluginpb.ReplicationState {
	out := &pluginpb.ReplicationState{AckedOffset: st.AckedOffset, InSync: int32(st.InSync), Fenced: st.Fenced, Reason: st.Reason}
	for _, r := range st.Replicas {
		var lc int64
		if !r.LastContact.IsZero() {
			lc = r.LastContact.UnixNano()
		}
		out.Replicas = append(out.Replicas, &pluginpb.ReplicaState{Id: r.ID, Addr: r.Addr, AckOffset: r.AckOffset, LagBytes: r.LagBytes,
			LagSeconds: r.LagSeconds, InSync: r.InSync, Connected: r.Connected, LastContactUnixNanos: lc})
	}
	return out
}

func replicationStateFromPB(st *pluginpb.ReplicationState) ReplicationState {
	out := ReplicationState{AckedOffset: st.GetAckedOffset(), InSync: int(st.GetInSync()), Fenced: st.GetFenced(), Reason: st.GetReason()}
	for _, r := range st.GetReplicas() {
		var lc time.Time
		if n := r.GetLastContactUnixNanos(); n != 0 {
			lc = time.Unix(0, n)
		}
		out.Replicas = append(out.Replicas, ReplicaState{ID: r.GetId(), Addr: r.GetAddr(), AckOffset: r.GetAckOffset(), LagBytes: r.GetLagBytes(),
			LagSeconds: r.GetLagSeconds(), InSync: r.GetInSync(), Connected: r.GetConnected(), LastContact: lc})
	}
	return out
}

// lineWriter turns writes into one log record per line (a plugin's raw
// stdout/stderr output).
type lineWriter struct {
	log    *slog.Logger
	level  slog.Level
	stream string
	mu     sync.Mutex
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			if len(w.buf) > 64<<10 {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = append(w.buf[:0], w.buf[i+1:]...)
	}
}

func (w *lineWriter) emit(line []byte) {
	if len(line) == 0 {
		return
	}
	w.log.Log(context.Background(), w.level, string(line), "stream", w.stream)
}
