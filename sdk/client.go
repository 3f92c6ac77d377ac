package sdk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/keelmq/keel/sdk/internal/pluginpb"
)

// DialOptions configures DialWith.
type DialOptions struct {
	// Path is the plugin binary. Required.
	Path string
	// SHA256, if not empty, pins the binary: 64 hex digits of its SHA-256,
	// checked before it is started (go-plugin's SecureConfig).
	SHA256 string
	// Logger receives the plugin's logs (its slog/hclog JSON lines on
	// stderr at their own level, Host.Log lines, raw output at debug) and
	// go-plugin's own. nil means slog.Default().
	Logger *slog.Logger
	// Args are extra command-line arguments for the binary.
	Args []string
	// Env is added to the host's environment for the plugin process.
	Env []string
	// SocketDir, if set, is where the plugin creates its unix socket
	// (PLUGIN_UNIX_SOCKET_DIR). A plugin killed with SIGKILL leaves its
	// socket file behind, so a host should use a directory it owns and
	// cleans. Empty means the system temporary directory.
	SocketDir string
	// StartTimeout bounds the handshake. 0 means the context's deadline,
	// or 30 s without one.
	StartTimeout time.Duration
}

// Client is a running external plugin process. Its methods are safe for
// concurrent use.
type Client struct {
	pc   *plugin.Client
	rpc  *plugin.GRPCClient
	d    *dispensed
	desc *pluginpb.Description
	path string
	log  *slog.Logger

	once  sync.Once
	flush *RemoteFlushStrategy
	repl  *RemoteReplicator
	index *RemoteIndexer
}

func (c *Client) lazyInit() {
	c.once.Do(func() {
		conn := c.d.conn
		c.flush = &RemoteFlushStrategy{c.newRemote(KindFlush, pluginpb.NewFlushStrategyClient(conn))}
		rc := pluginpb.NewReplicatorClient(conn)
		c.repl = &RemoteReplicator{remotePlugin: c.newRemote(KindReplication, rc), rc: rc}
		ic := pluginpb.NewIndexerClient(conn)
		c.index = &RemoteIndexer{remotePlugin: c.newRemote(KindIndex, ic), ic: ic}
	})
}

// Dial starts the plugin binary at path (checking it against sha256hex
// first when that is not empty), performs go-plugin's handshake (protocol
// version Version, gRPC only) and asks the binary which plugin kinds and
// optional interfaces it serves. The process runs until Kill. logger
// receives the plugin's logs; nil means slog.Default().
//
// Errors: a checksum mismatch, a binary that is not a keel plugin or speaks
// another protocol version, a start timeout, or ctx ending. On error no
// process is left running.
func Dial(ctx context.Context, path, sha256hex string, logger *slog.Logger) (*Client, error) {
	return DialWith(ctx, DialOptions{Path: path, SHA256: sha256hex, Logger: logger})
}

// DialWith is Dial with every option.
func DialWith(ctx context.Context, o DialOptions) (*Client, error) {
	if o.Path == "" {
		return nil, fmt.Errorf("dial plugin: no path")
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("plugin_path", o.Path)
	var sec *plugin.SecureConfig
	if o.SHA256 != "" {
		sum, err := hex.DecodeString(o.SHA256)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("dial plugin %s: sha256 pin %q is not 64 hex digits", o.Path, o.SHA256)
		}
		sec = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(dl), time.Millisecond)
		}
	}
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Env = append(cmd.Env, o.Env...)
	if o.SocketDir != "" {
		cmd.Env = append(cmd.Env, "PLUGIN_UNIX_SOCKET_DIR="+o.SocketDir)
	}
	pc := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          clientPluginSet(),
		Cmd:              cmd,
		SecureConfig:     sec,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           NewHCLogAdapter(logger, "plugin"),
		StartTimeout:     timeout,
		SyncStdout:       &lineWriter{log: logger, level: slog.LevelDebug, stream: "stdout"},
		SyncStderr:       &lineWriter{log: logger, level: slog.LevelDebug, stream: "stderr"},
		GRPCDialOptions: []grpc.DialOption{
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		},
	})
	type result struct {
		c   *Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := connect(ctx, pc, o.Path, logger)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			pc.Kill()
			return nil, r.err
		}
		return r.c, nil
	case <-ctx.Done():
		go func() { <-ch; pc.Kill() }()
		return nil, fmt.Errorf("dial plugin %s: %w", o.Path, ctx.Err())
	}
}

func connect(ctx context.Context, pc *plugin.Client, path string, logger *slog.Logger) (*Client, error) {
	cp, err := pc.Client()
	if err != nil {
		return nil, fmt.Errorf("dial plugin %s: %w", path, err)
	}
	rpc, ok := cp.(*plugin.GRPCClient)
	if !ok {
		return nil, fmt.Errorf("dial plugin %s: not a gRPC plugin", path)
	}
	raw, err := rpc.Dispense(basePluginName)
	if err != nil {
		return nil, fmt.Errorf("dial plugin %s: %w", path, err)
	}
	d := raw.(*dispensed)
	desc, err := pluginpb.NewPluginClient(d.conn).Describe(ctx, &pluginpb.Empty{})
	if err != nil {
		return nil, fmt.Errorf("dial plugin %s: describe: %w", path, fromStatus(err))
	}
	if desc.SdkVersion != Version {
		return nil, fmt.Errorf("dial plugin %s: plugin speaks sdk version %d, host %d", path, desc.SdkVersion, Version)
	}
	return &Client{pc: pc, rpc: rpc, d: d, desc: desc, path: path, log: logger}, nil
}

func clientPluginSet() plugin.PluginSet {
	return plugin.PluginSet{
		basePluginName:          &grpcPlugin{},
		string(KindFlush):       &grpcPlugin{kind: KindFlush},
		string(KindReplication): &grpcPlugin{kind: KindReplication},
		string(KindIndex):       &grpcPlugin{kind: KindIndex},
	}
}

// Path is the plugin binary's path.
func (c *Client) Path() string { return c.path }

// Pid is the plugin process id as the plugin reported it.
func (c *Client) Pid() int { return int(c.desc.Pid) }

// Kinds lists the plugin kinds the binary serves.
func (c *Client) Kinds() []Kind {
	ks := make([]Kind, len(c.desc.Kinds))
	for i, k := range c.desc.Kinds {
		ks[i] = Kind(k)
	}
	return ks
}

// Serves reports whether the binary serves kind k.
func (c *Client) Serves(k Kind) bool { return slices.Contains(c.desc.Kinds, string(k)) }

// Ping checks the plugin answers (gRPC health check). An error means it
// is gone or hung; it wraps ErrUnavailable.
func (c *Client) Ping() error {
	if err := c.rpc.Ping(); err != nil {
		return fmt.Errorf("ping plugin %s: %w: %w", c.path, ErrUnavailable, err)
	}
	return nil
}

// Exited reports whether the plugin process has exited (crashed, killed,
// or ended by itself).
func (c *Client) Exited() bool { return c.pc.Exited() }

// Done is closed when the plugin process exits, for whatever reason; the
// host watches it to detect crashes. Calls to a plugin that exited fail
// with errors matching ErrUnavailable.
func (c *Client) Done() <-chan struct{} { return c.d.done.Done() }

// Kill ends the plugin process: it asks it to shut down and kills it if it
// does not within a couple of seconds, and blocks until it exited. It does
// not call Stop on the plugin; the host stops plugins first. Safe to call
// more than once.
func (c *Client) Kill() { c.pc.Kill() }

// FlushStrategy returns the binary's flush strategy; ErrNotSupported if it
// does not serve one. Every call returns the same value.
func (c *Client) FlushStrategy() (*RemoteFlushStrategy, error) {
	if !c.Serves(KindFlush) {
		return nil, fmt.Errorf("plugin %s serves no flush strategy: %w", c.path, ErrNotSupported)
	}
	c.lazyInit()
	return c.flush, nil
}

// Replicator returns the binary's replicator; ErrNotSupported if it does
// not serve one. Every call returns the same value.
func (c *Client) Replicator() (*RemoteReplicator, error) {
	if !c.Serves(KindReplication) {
		return nil, fmt.Errorf("plugin %s serves no replicator: %w", c.path, ErrNotSupported)
	}
	c.lazyInit()
	return c.repl, nil
}

// Indexer returns the binary's indexer; ErrNotSupported if it does not
// serve one. Every call returns the same value.
func (c *Client) Indexer() (*RemoteIndexer, error) {
	if !c.Serves(KindIndex) {
		return nil, fmt.Errorf("plugin %s serves no indexer: %w", c.path, ErrNotSupported)
	}
	c.lazyInit()
	return c.index, nil
}

// ---------------------------------------------------------------- adapters

// lifecycleClient is the part every kind's generated client shares.
type lifecycleClient interface {
	Configure(ctx context.Context, in *pluginpb.ConfigureRequest, opts ...grpc.CallOption) (*pluginpb.ConfigureResponse, error)
	Start(ctx context.Context, in *pluginpb.StartRequest, opts ...grpc.CallOption) (*pluginpb.Empty, error)
	Stop(ctx context.Context, in *pluginpb.Empty, opts ...grpc.CallOption) (*pluginpb.Empty, error)
}

// remotePlugin implements Plugin, StatusReporter and MetricsWriter over
// gRPC for one kind of a Client.
type remotePlugin struct {
	c    *Client
	kind Kind
	lc   lifecycleClient
	base pluginpb.PluginClient

	mu      sync.Mutex
	hostSrv *grpc.Server // serving Host to the plugin while started
	resp    *pluginpb.ConfigureResponse
}

func (c *Client) newRemote(kind Kind, lc lifecycleClient) remotePlugin {
	return remotePlugin{c: c, kind: kind, lc: lc, base: pluginpb.NewPluginClient(c.d.conn)}
}

// Client is the process the plugin runs in.
func (r *remotePlugin) Client() *Client { return r.c }

// Configure implements Plugin: the plugin's Configure runs in its process;
// the ack policy it then reports is cached for AckPolicy.
func (r *remotePlugin) Configure(ctx context.Context, cfg Config) error {
	resp, err := r.lc.Configure(ctx, &pluginpb.ConfigureRequest{Config: configToPB(cfg)})
	if err != nil {
		return fromStatus(err)
	}
	r.mu.Lock()
	r.resp = resp
	r.mu.Unlock()
	return nil
}

// Start implements Plugin: host is served to the plugin on one brokered
// gRPC connection that the plugin reuses for every callback until Stop.
func (r *remotePlugin) Start(ctx context.Context, host Host) error {
	r.mu.Lock()
	if r.hostSrv != nil {
		r.mu.Unlock()
		return fmt.Errorf("start %s plugin %s: already started", r.kind, r.c.path)
	}
	r.mu.Unlock()
	broker := r.c.d.broker
	id := broker.NextId()
	srvCh := make(chan *grpc.Server, 1)
	go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg))...)
		pluginpb.RegisterHostServer(s, &hostServer{h: host})
		srvCh <- s
		return s
	})
	_, err := r.lc.Start(ctx, &pluginpb.StartRequest{HostBrokerId: id})
	if err != nil {
		// The broker creates the server as soon as its listener exists;
		// stop it when it does (it never does if the listener failed).
		go func() {
			select {
			case srv := <-srvCh:
				srv.Stop()
			case <-time.After(time.Minute):
			case <-r.c.Done():
			}
		}()
		return fromStatus(err)
	}
	// Start succeeded, so the plugin dialed the listener: the server exists
	// or is about to.
	var srv *grpc.Server
	select {
	case srv = <-srvCh:
	case <-r.c.Done():
		return fmt.Errorf("start %s plugin %s: plugin exited: %w", r.kind, r.c.path, ErrUnavailable)
	}
	r.mu.Lock()
	r.hostSrv = srv
	r.mu.Unlock()
	return nil
}

// Stop implements Plugin: the plugin's Stop runs in its process, then the
// Host connection is closed. It does not end the process (Client.Kill).
func (r *remotePlugin) Stop(ctx context.Context) error {
	_, err := r.lc.Stop(ctx, &pluginpb.Empty{})
	r.mu.Lock()
	srv := r.hostSrv
	r.hostSrv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	return fromStatus(err)
}

// Status implements StatusReporter; ErrNotSupported when the plugin does
// not implement it.
func (r *remotePlugin) Status(ctx context.Context) ([]byte, error) {
	if !r.c.desc.Status {
		return nil, fmt.Errorf("plugin %s status: %w", r.c.path, ErrNotSupported)
	}
	b, err := r.base.Status(ctx, &pluginpb.Empty{})
	if err != nil {
		return nil, fromStatus(err)
	}
	return b.Data, nil
}

// WriteMetrics implements MetricsWriter; ErrNotSupported when the plugin
// does not implement it.
func (r *remotePlugin) WriteMetrics(ctx context.Context) ([]byte, error) {
	if !r.c.desc.Metrics {
		return nil, fmt.Errorf("plugin %s metrics: %w", r.c.path, ErrNotSupported)
	}
	b, err := r.base.WriteMetrics(ctx, &pluginpb.Empty{})
	if err != nil {
		return nil, fromStatus(err)
	}
	return b.Data, nil
}

// RemoteFlushStrategy is a FlushStrategy running in a plugin process. It
// also implements StatusReporter and MetricsWriter, answering
// ErrNotSupported when the plugin does not.
type RemoteFlushStrategy struct{ remotePlugin }

// AckPolicy implements FlushStrategy: the policy the plugin reported at
// Configure (the zero policy before Configure).
func (f *RemoteFlushStrategy) AckPolicy() FlushPolicy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return flushPolicyFromPB(f.resp.GetFlush())
}

// RemoteReplicator is a Replicator running in a plugin process. It also
// implements StatusReporter, MetricsWriter, Promoter and ForceWriter,
// answering ErrNotSupported when the plugin does not.
type RemoteReplicator struct {
	remotePlugin
	rc pluginpb.ReplicatorClient
}

// AckPolicy implements Replicator: the policy the plugin reported at
// Configure (the zero policy before Configure).
func (r *RemoteReplicator) AckPolicy() ReplicationPolicy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return replicationPolicyFromPB(r.resp.GetReplication())
}

// Promote implements Promoter.
func (r *RemoteReplicator) Promote(ctx context.Context) (int32, error) {
	if !r.c.desc.Promote {
		return 0, fmt.Errorf("plugin %s promote: %w", r.c.path, ErrNotSupported)
	}
	e, err := r.rc.Promote(ctx, &pluginpb.Empty{})
	if err != nil {
		return 0, fromStatus(err)
	}
	return e.Epoch, nil
}

// ForceWrites implements ForceWriter.
func (r *RemoteReplicator) ForceWrites(ctx context.Context) error {
	if !r.c.desc.ForceWrites {
		return fmt.Errorf("plugin %s force writes: %w", r.c.path, ErrNotSupported)
	}
	_, err := r.rc.ForceWrites(ctx, &pluginpb.Empty{})
	return fromStatus(err)
}

// RemoteIndexer is an Indexer running in a plugin process: one RPC per
// Index batch. It also implements StatusReporter and MetricsWriter.
type RemoteIndexer struct {
	remotePlugin
	ic pluginpb.IndexerClient
}

// Index implements Indexer with one call for the whole batch.
func (x *RemoteIndexer) Index(ctx context.Context, batch []Record) error {
	recs := make([]pluginpb.Record, len(batch))
	req := &pluginpb.IndexRequest{Records: make([]*pluginpb.Record, len(batch))}
	for i := range batch {
		b := &batch[i]
		recs[i] = pluginpb.Record{Topic: b.Topic, QueueId: b.QueueID, QueueOffset: b.QueueOffset, PhysOffset: b.PhysOffset, Size: b.Size,
			TagsCode: b.TagsCode, StoreTimestamp: b.StoreTimestamp, SysFlag: b.SysFlag, Keys: b.Keys, UniqKey: b.UniqKey}
		req.Records[i] = &recs[i]
	}
	_, err := x.ic.Index(ctx, req)
	return fromStatus(err)
}

// Sync implements Indexer.
func (x *RemoteIndexer) Sync(ctx context.Context) error {
	_, err := x.ic.Sync(ctx, &pluginpb.Empty{})
	return fromStatus(err)
}

// Query implements Indexer.
func (x *RemoteIndexer) Query(ctx context.Context, q Query) ([]int64, error) {
	r, err := x.ic.Query(ctx, &pluginpb.QueryRequest{Topic: q.Topic, Key: q.Key, Begin: q.Begin, End: q.End, Max: int64(q.Max)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return r.Offsets, nil
}

var (
	_ FlushStrategy  = (*RemoteFlushStrategy)(nil)
	_ StatusReporter = (*RemoteFlushStrategy)(nil)
	_ MetricsWriter  = (*RemoteFlushStrategy)(nil)
	_ Replicator     = (*RemoteReplicator)(nil)
	_ Promoter       = (*RemoteReplicator)(nil)
	_ ForceWriter    = (*RemoteReplicator)(nil)
	_ StatusReporter = (*RemoteReplicator)(nil)
	_ Indexer        = (*RemoteIndexer)(nil)
	_ MetricsWriter  = (*RemoteIndexer)(nil)
)

// ---------------------------------------------------------------- host side of callbacks

// hostServer serves a Host to one plugin over its brokered connection.
type hostServer struct {
	pluginpb.UnimplementedHostServer
	h Host
}

func (s *hostServer) Positions(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Positions, error) {
	p, err := s.h.Positions(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Positions{Min: p.Min, Dispatched: p.Dispatched, Confirm: p.Confirm, Flushed: p.Flushed, Committed: p.Committed, Epoch: p.Epoch}, nil
}

// watchMinGap bounds the committed-offset stream to one message per gap
// while appends arrive back to back. A notification after a quiet period
// goes out at once; under load the plugin is busy flushing anyway and
// needs only the latest value, and every message costs CPU in both
// processes.
const watchMinGap = 250 * time.Microsecond

// WatchCommitted sends the committed offset whenever it grows past the
// last value sent: one message covers every append since the previous one.
func (s *hostServer) WatchCommitted(req *pluginpb.Offset, stream pluginpb.Host_WatchCommittedServer) error {
	after := req.GetOffset()
	var last time.Time
	for {
		c, err := s.h.WaitCommitted(stream.Context(), after)
		if err != nil {
			return toStatus(err)
		}
		if gap := time.Since(last); gap < watchMinGap {
			time.Sleep(watchMinGap - gap)
			if c, err = s.h.WaitCommitted(stream.Context(), after); err != nil {
				return toStatus(err)
			}
		}
		if err := stream.Send(&pluginpb.Offset{Offset: c}); err != nil {
			return err
		}
		last = time.Now()
		after = c
	}
}

func (s *hostServer) Commit(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Offset, error) {
	c, err := s.h.Commit(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Offset{Offset: c}, nil
}

func (s *hostServer) Flush(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Offset, error) {
	f, err := s.h.Flush(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Offset{Offset: f}, nil
}

func (s *hostServer) FlushAfter(ctx context.Context, r *pluginpb.Offset) (*pluginpb.Offset, error) {
	var f int64
	var err error
	if fa, ok := s.h.(FlushAfterer); ok {
		f, err = fa.FlushAfter(ctx, r.GetOffset())
	} else {
		f, err = WaitThenFlush(ctx, s.h, r.GetOffset())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Offset{Offset: f}, nil
}

func (s *hostServer) ReadLog(ctx context.Context, r *pluginpb.ReadLogRequest) (*pluginpb.Bytes, error) {
	mb := r.GetMaxBytes()
	if mb > maxMsg/2 {
		mb = maxMsg / 2
	}
	b, err := s.h.ReadLog(ctx, r.GetFrom(), int(mb))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Bytes{Data: b}, nil
}

func (s *hostServer) AppendLog(ctx context.Context, r *pluginpb.AppendLogRequest) (*pluginpb.Empty, error) {
	if err := s.h.AppendLog(ctx, r.GetOffset(), r.GetData()); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

func (s *hostServer) TruncateLog(ctx context.Context, r *pluginpb.Offset) (*pluginpb.Empty, error) {
	if err := s.h.TruncateLog(ctx, r.GetOffset()); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

func (s *hostServer) ReadRecord(ctx context.Context, r *pluginpb.Offset) (*pluginpb.Bytes, error) {
	b, err := s.h.ReadRecord(ctx, r.GetOffset())
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Bytes{Data: b}, nil
}

func (s *hostServer) Epochs(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.EpochList, error) {
	es, err := s.h.Epochs(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return epochsToPB(es), nil
}

func (s *hostServer) SetEpochs(ctx context.Context, r *pluginpb.EpochList) (*pluginpb.Empty, error) {
	if err := s.h.SetEpochs(ctx, epochsFromPB(r)); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

func (s *hostServer) MetaSnapshot(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Bytes, error) {
	b, err := s.h.MetaSnapshot(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Bytes{Data: b}, nil
}

func (s *hostServer) MetaApply(ctx context.Context, r *pluginpb.Bytes) (*pluginpb.Empty, error) {
	if err := s.h.MetaApply(ctx, r.GetData()); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

func (s *hostServer) ReportReplication(ctx context.Context, r *pluginpb.ReplicationState) (*pluginpb.Empty, error) {
	if err := s.h.ReportReplication(ctx, replicationStateFromPB(r)); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

func (s *hostServer) Log(ctx context.Context, r *pluginpb.LogBatch) (*pluginpb.Empty, error) {
	for _, l := range r.GetLines() {
		s.h.Log(ctx, int(l.GetLevel()), l.GetMsg(), l.GetAttrs())
	}
	return &pluginpb.Empty{}, nil
}

// ---------------------------------------------------------------- hclog → slog

// NewHCLogAdapter returns an hclog.Logger that writes into l: go-plugin's
// own logs and the JSON log lines a plugin writes to stderr (which go-plugin
// re-emits at their level with their keys and values) land in the host's
// slog logger. name is added as the "logger" attribute.
func NewHCLogAdapter(l *slog.Logger, name string) hclog.Logger {
	return &hcAdapter{l: l, name: name, level: new(atomic.Int32)}
}

type hcAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level *atomic.Int32 // an hclog.Level; NoLevel: follow the slog handler
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (a *hcAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || !a.enabled(level) {
		return
	}
	attrs := make([]any, 0, len(a.args)+len(args)+2)
	if a.name != "" {
		attrs = append(attrs, "logger", a.name)
	}
	attrs = append(attrs, a.args...)
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "timestamp" {
			continue // go-plugin adds the plugin's own timestamp; slog stamps its own
		}
		attrs = append(attrs, args[i], args[i+1])
	}
	if len(args)%2 == 1 {
		attrs = append(attrs, "EXTRA_VALUE", args[len(args)-1])
	}
	a.l.Log(context.Background(), slogLevel(level), msg, attrs...)
}

func (a *hcAdapter) enabled(level hclog.Level) bool {
	if floor := hclog.Level(a.level.Load()); floor != hclog.NoLevel && level < floor {
		return false
	}
	return a.l.Enabled(context.Background(), slogLevel(level))
}

func (a *hcAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hcAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hcAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hcAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hcAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hcAdapter) IsTrace() bool                 { return a.enabled(hclog.Trace) }
func (a *hcAdapter) IsDebug() bool                 { return a.enabled(hclog.Debug) }
func (a *hcAdapter) IsInfo() bool                  { return a.enabled(hclog.Info) }
func (a *hcAdapter) IsWarn() bool                  { return a.enabled(hclog.Warn) }
func (a *hcAdapter) IsError() bool                 { return a.enabled(hclog.Error) }
func (a *hcAdapter) ImpliedArgs() []any            { return a.args }
func (a *hcAdapter) Name() string                  { return a.name }

func (a *hcAdapter) With(args ...any) hclog.Logger {
	b := *a
	b.args = append(slices.Clip(a.args), args...)
	return &b
}

func (a *hcAdapter) Named(name string) hclog.Logger {
	b := *a
	if b.name != "" {
		b.name += "." + name
	} else {
		b.name = name
	}
	return &b
}

func (a *hcAdapter) ResetNamed(name string) hclog.Logger {
	b := *a
	b.name = name
	return &b
}

func (a *hcAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }

func (a *hcAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *hcAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hcAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return &lineWriter{log: a.l, level: slog.LevelInfo, stream: a.name}
}
