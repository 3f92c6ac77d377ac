package sdk

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/internal/commitpage"
	"github.com/keelmq/keel/internal/pluginlane"
	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
)

// pluginServer serves one Plugin value to the host: the base service and
// one service per kind the value implements.
type pluginServer struct {
	p      Plugin
	mu     sync.Mutex
	broker *plugin.GRPCBroker
	hosts  map[Kind]*remoteHost // started kinds
}

// kindsOf lists the kinds p implements, in a fixed order.
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

// pluginSet is the go-plugin plugin set Serve serves.
func (s *pluginServer) pluginSet() plugin.PluginSet {
	set := plugin.PluginSet{pluginwire.BaseName: s.glue(func(g *grpc.Server) {
		pluginpb.RegisterPluginServer(g, &baseServer{srv: s})
	})}
	for _, k := range kindsOf(s.p) {
		lc := lifecycle{srv: s, kind: k}
		var register func(*grpc.Server)
		switch k {
		case KindFlush:
			register = func(g *grpc.Server) { pluginpb.RegisterFlushStrategyServer(g, &flushServer{lifecycle: lc}) }
		case KindReplication:
			register = func(g *grpc.Server) { pluginpb.RegisterReplicatorServer(g, &replicatorServer{lifecycle: lc}) }
		case KindIndex:
			register = func(g *grpc.Server) { pluginpb.RegisterIndexerServer(g, &indexerServer{lifecycle: lc}) }
		}
		set[string(k)] = s.glue(register)
	}
	return set
}

// glue is the go-plugin plugin registering one service; it keeps the
// broker the Host connections are dialed through.
func (s *pluginServer) glue(register func(*grpc.Server)) *pluginwire.Plugin {
	return &pluginwire.Plugin{Register: func(b *plugin.GRPCBroker, g *grpc.Server) {
		s.mu.Lock()
		s.broker = b
		s.mu.Unlock()
		register(g)
	}}
}

func (s *pluginServer) configure(ctx context.Context, kind Kind, req *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	if err := s.p.Configure(ctx, configFromPB(req.GetConfig())); err != nil {
		return nil, pluginwire.ToStatus(err)
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

func (s *pluginServer) start(ctx context.Context, kind Kind, req *pluginpb.StartRequest) error {
	s.mu.Lock()
	b := s.broker
	_, running := s.hosts[kind]
	s.mu.Unlock()
	if running {
		return fmt.Errorf("start %s plugin: already started", kind)
	}
	conn, err := b.DialWithOptions(req.GetHostBrokerId(), pluginwire.CallOptions())
	if err != nil {
		return fmt.Errorf("start %s plugin: dial host callbacks: %w: %w", kind, ErrUnavailable, err)
	}
	var lane *pluginlane.Conn
	var laneErr error
	if addr := req.GetLaneAddr(); addr != "" {
		lane, laneErr = pluginlane.Dial(ctx, addr, req.GetLaneToken())
	}
	var files *core.LogFiles
	if lane != nil && req.GetLogDir() != "" {
		files, _ = core.OpenLogFiles(req.GetLogDir(), req.GetLogSegmentSize())
	}
	var page *commitpage.Reader
	var pageErr error
	if lane != nil && req.GetCommittedPage() != "" {
		page, pageErr = commitpage.Open(req.GetCommittedPage())
	}
	h := newRemoteHost(conn, lane, files, page)
	if laneErr != nil {
		h.Log(ctx, int(slog.LevelWarn), "plugin lane unavailable: Host calls use gRPC", map[string]string{"err": laneErr.Error()})
	}
	if pageErr != nil {
		h.Log(ctx, int(slog.LevelWarn), "committed-offset page unavailable: the offset is asked for with calls", map[string]string{"err": pageErr.Error()})
	}
	if err := s.p.Start(ctx, h); err != nil {
		h.close()
		return err
	}
	s.mu.Lock()
	s.hosts[kind] = h
	s.mu.Unlock()
	return nil
}

func (s *pluginServer) stop(ctx context.Context, kind Kind) error {
	err := s.p.Stop(ctx)
	s.mu.Lock()
	h := s.hosts[kind]
	delete(s.hosts, kind)
	s.mu.Unlock()
	if h != nil {
		h.close()
	}
	return err
}

// optional returns p as the optional interface T, or an error wrapping
// ErrNotSupported that names what (as a status, for a server's reply).
func optional[T any](p Plugin, what string) (T, error) {
	t, ok := p.(T)
	if !ok {
		return t, pluginwire.ToStatus(fmt.Errorf("%s: %w", what, ErrNotSupported))
	}
	return t, nil
}

// baseServer is the Plugin service every binary serves.
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
	sr, err := optional[StatusReporter](b.srv.p, "plugin status")
	if err != nil {
		return nil, err
	}
	return pluginwire.BytesReply(sr.Status(ctx))
}

func (b *baseServer) WriteMetrics(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Bytes, error) {
	mw, err := optional[MetricsWriter](b.srv.p, "plugin metrics")
	if err != nil {
		return nil, err
	}
	return pluginwire.BytesReply(mw.WriteMetrics(ctx))
}
