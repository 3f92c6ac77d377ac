package pluginrpc

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/keelmq/keel/internal/pluginlane"
	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
	"github.com/keelmq/keel/sdk"
)

// lifecycleClient is the part every kind's generated client shares.
type lifecycleClient interface {
	Configure(ctx context.Context, in *pluginpb.ConfigureRequest, opts ...grpc.CallOption) (*pluginpb.ConfigureResponse, error)
	Start(ctx context.Context, in *pluginpb.StartRequest, opts ...grpc.CallOption) (*pluginpb.Empty, error)
	Stop(ctx context.Context, in *pluginpb.Empty, opts ...grpc.CallOption) (*pluginpb.Empty, error)
}

// remotePlugin implements sdk.Plugin, sdk.StatusReporter and
// sdk.MetricsWriter over gRPC for one kind of a Client.
type remotePlugin struct {
	c    *Client
	kind sdk.Kind
	lc   lifecycleClient
	base pluginpb.PluginClient

	mu      sync.Mutex
	hostSrv *grpc.Server       // serving Host to the plugin while started
	lane    *pluginlane.Server // the same, over the lane, while started (nil: none)
	page    *sharedPage        // the committed-offset page offered with the lane (nil: none)
	resp    *pluginpb.ConfigureResponse
}

func (c *Client) newRemote(kind sdk.Kind, lc lifecycleClient) remotePlugin {
	return remotePlugin{c: c, kind: kind, lc: lc, base: pluginpb.NewPluginClient(c.conn.Conn)}
}

// Client is the process the plugin runs in.
func (r *remotePlugin) Client() *Client { return r.c }

// Configure implements sdk.Plugin: the plugin's Configure runs in its
// process with cfg's fields and nothing else; the ack policy it then
// reports is cached for AckPolicy.
func (r *remotePlugin) Configure(ctx context.Context, cfg sdk.Config) error {
	resp, err := r.lc.Configure(ctx, &pluginpb.ConfigureRequest{Config: configToPB(cfg)})
	if err != nil {
		return pluginwire.FromStatus(err)
	}
	r.mu.Lock()
	r.resp = resp
	r.mu.Unlock()
	return nil
}

// Start implements sdk.Plugin: host is served to the plugin on one
// brokered gRPC connection that the plugin reuses for every callback until
// Stop.
func (r *remotePlugin) Start(ctx context.Context, host sdk.Host) error {
	r.mu.Lock()
	if r.hostSrv != nil {
		r.mu.Unlock()
		return fmt.Errorf("start %s plugin %s: already started", r.kind, r.c.path)
	}
	r.mu.Unlock()
	broker := r.c.conn.Broker
	id := broker.NextId()
	hs := &hostServer{h: host}
	srvCh := make(chan *grpc.Server, 1)
	go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, pluginwire.ServerOptions()...)...)
		pluginpb.RegisterHostServer(s, hs)
		srvCh <- s
		return s
	})
	req := &pluginpb.StartRequest{HostBrokerId: id}
	lane := r.openLane(hs)
	var page *sharedPage
	if lane != nil {
		req.LaneAddr, req.LaneToken = lane.Addr(), lane.Token()
		if ll, ok := host.(logLocator); ok {
			req.LogDir, req.LogSegmentSize, _ = ll.LogLocation()
		}
		if page = r.openPage(r.c.socketDir, host); page != nil {
			req.CommittedPage = page.w.Path()
		}
	}
	_, err := r.lc.Start(ctx, req)
	if err != nil {
		if lane != nil {
			lane.Close()
		}
		page.close()
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
		return pluginwire.FromStatus(err)
	}
	// Start succeeded, so the plugin dialed the listener: the server exists
	// or is about to.
	var srv *grpc.Server
	select {
	case srv = <-srvCh:
	case <-r.c.Done():
		if lane != nil {
			lane.Close()
		}
		page.close()
		return fmt.Errorf("start %s plugin %s: plugin exited: %w", r.kind, r.c.path, sdk.ErrUnavailable)
	}
	r.mu.Lock()
	r.hostSrv, r.lane, r.page = srv, lane, page
	r.mu.Unlock()
	if page != nil {
		// A process that dies is not stopped (the supervisor starts a new
		// one): its page goes with it.
		go func() {
			<-r.c.Done()
			r.mu.Lock()
			mine := r.page == page
			if mine {
				r.page = nil
			}
			r.mu.Unlock()
			if mine {
				page.close()
			}
		}()
	}
	return nil
}

// logLocator is a Host whose store's segment files a plugin on this
// machine may read itself (storehost.Host): offered with the lane, so
// NoLane keeps every read a call too.
type logLocator interface {
	// LogLocation is core.Store.LogLocation; ok false offers nothing.
	LogLocation() (dir string, segmentSize int64, ok bool)
}

// laneAcceptWithin bounds how long a lane waits for the plugin to dial it
// (the plugin dials it inside its Start, before answering).
const laneAcceptWithin = time.Minute

// openLane listens for the plugin's lane (package pluginlane) serving hs,
// unless the Client was dialed without one; nil when it cannot (the
// plugin then uses gRPC alone, as one built before lanes does).
func (r *remotePlugin) openLane(hs *hostServer) *pluginlane.Server {
	if r.c.noLane {
		return nil
	}
	lane, err := pluginlane.NewServer(r.c.socketDir, &pluginpb.Host_ServiceDesc, hs)
	if err != nil {
		r.c.log.Warn("plugin lane unavailable: Host calls use gRPC", "kind", r.kind, "err", err)
		return nil
	}
	// The calls on a replicator's data path that never wait for an event
	// or an fsync (AppendLog may wait for room in the tail: not inline).
	lane.Inline(pluginpb.Host_Positions_FullMethodName, pluginpb.Host_ReadLog_FullMethodName,
		pluginpb.Host_ReadRecord_FullMethodName, pluginpb.Host_Epochs_FullMethodName, pluginpb.Host_ReportReplication_FullMethodName)
	go func() {
		if err := lane.Serve(laneAcceptWithin); err != nil {
			r.c.log.Debug("plugin lane ended", "kind", r.kind, "err", err)
		}
	}()
	return lane
}

// LaneCalls is the number of Host calls the plugin made over its lane
// since it was last started (0 when it uses gRPC alone).
func (r *remotePlugin) LaneCalls() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lane == nil {
		return 0
	}
	return r.lane.Calls()
}

// Stop implements sdk.Plugin: the plugin's Stop runs in its process, then
// the Host connection is closed. It does not end the process (Client.Kill).
func (r *remotePlugin) Stop(ctx context.Context) error {
	_, err := r.lc.Stop(ctx, &pluginpb.Empty{})
	r.mu.Lock()
	srv, lane, page := r.hostSrv, r.lane, r.page
	r.hostSrv, r.page = nil, nil
	r.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	if lane != nil {
		lane.Close()
	}
	page.close()
	return pluginwire.FromStatus(err)
}

// supports returns an error wrapping sdk.ErrNotSupported unless the plugin
// described the optional interface (has), naming what.
func (r *remotePlugin) supports(has bool, what string) error {
	if !has {
		return fmt.Errorf("plugin %s %s: %w", r.c.path, what, sdk.ErrNotSupported)
	}
	return nil
}

// Status implements sdk.StatusReporter; sdk.ErrNotSupported when the
// plugin does not implement it.
func (r *remotePlugin) Status(ctx context.Context) ([]byte, error) {
	if err := r.supports(r.c.desc.Status, "status"); err != nil {
		return nil, err
	}
	return pluginwire.BytesResult(r.base.Status(ctx, &pluginpb.Empty{}))
}

// WriteMetrics implements sdk.MetricsWriter; sdk.ErrNotSupported when the
// plugin does not implement it.
func (r *remotePlugin) WriteMetrics(ctx context.Context) ([]byte, error) {
	if err := r.supports(r.c.desc.Metrics, "metrics"); err != nil {
		return nil, err
	}
	return pluginwire.BytesResult(r.base.WriteMetrics(ctx, &pluginpb.Empty{}))
}

// RemoteFlushStrategy is an sdk.FlushStrategy running in a plugin process.
// It also implements sdk.StatusReporter and sdk.MetricsWriter, answering
// sdk.ErrNotSupported when the plugin does not.
type RemoteFlushStrategy struct{ remotePlugin }

// AckPolicy implements sdk.FlushStrategy: the policy the plugin reported
// at Configure (the zero policy before Configure).
func (f *RemoteFlushStrategy) AckPolicy() sdk.FlushPolicy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return flushPolicyFromPB(f.resp.GetFlush())
}

// RemoteReplicator is an sdk.Replicator running in a plugin process. It
// also implements sdk.StatusReporter, sdk.MetricsWriter, sdk.Promoter and
// sdk.ForceWriter, answering sdk.ErrNotSupported when the plugin does not.
type RemoteReplicator struct {
	remotePlugin
	rc pluginpb.ReplicatorClient
}

// AckPolicy implements sdk.Replicator: the policy the plugin reported at
// Configure (the zero policy before Configure).
func (r *RemoteReplicator) AckPolicy() sdk.ReplicationPolicy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return replicationPolicyFromPB(r.resp.GetReplication())
}

// Promote implements sdk.Promoter.
func (r *RemoteReplicator) Promote(ctx context.Context) (int32, error) {
	if err := r.supports(r.c.desc.Promote, "promote"); err != nil {
		return 0, err
	}
	e, err := r.rc.Promote(ctx, &pluginpb.Empty{})
	if err != nil {
		return 0, pluginwire.FromStatus(err)
	}
	return e.Epoch, nil
}

// ForceWrites implements sdk.ForceWriter.
func (r *RemoteReplicator) ForceWrites(ctx context.Context) error {
	if err := r.supports(r.c.desc.ForceWrites, "force writes"); err != nil {
		return err
	}
	return pluginwire.EmptyResult(r.rc.ForceWrites(ctx, &pluginpb.Empty{}))
}

// RemoteIndexer is an sdk.Indexer running in a plugin process: one RPC per
// Index batch. It also implements sdk.StatusReporter and
// sdk.MetricsWriter.
type RemoteIndexer struct {
	remotePlugin
	ic pluginpb.IndexerClient
}

// Index implements sdk.Indexer with one call for the whole batch.
func (x *RemoteIndexer) Index(ctx context.Context, batch []sdk.Record) error {
	return pluginwire.EmptyResult(x.ic.Index(ctx, indexRequest(batch)))
}

// Sync implements sdk.Indexer.
func (x *RemoteIndexer) Sync(ctx context.Context) error {
	return pluginwire.EmptyResult(x.ic.Sync(ctx, &pluginpb.Empty{}))
}

// Query implements sdk.Indexer.
func (x *RemoteIndexer) Query(ctx context.Context, q sdk.Query) ([]int64, error) {
	r, err := x.ic.Query(ctx, &pluginpb.QueryRequest{Topic: q.Topic, Key: q.Key, Begin: q.Begin, End: q.End, Max: int64(q.Max)})
	if err != nil {
		return nil, pluginwire.FromStatus(err)
	}
	return r.Offsets, nil
}

var (
	_ sdk.FlushStrategy  = (*RemoteFlushStrategy)(nil)
	_ sdk.StatusReporter = (*RemoteFlushStrategy)(nil)
	_ sdk.MetricsWriter  = (*RemoteFlushStrategy)(nil)
	_ sdk.Replicator     = (*RemoteReplicator)(nil)
	_ sdk.Promoter       = (*RemoteReplicator)(nil)
	_ sdk.ForceWriter    = (*RemoteReplicator)(nil)
	_ sdk.StatusReporter = (*RemoteReplicator)(nil)
	_ sdk.Indexer        = (*RemoteIndexer)(nil)
	_ sdk.MetricsWriter  = (*RemoteIndexer)(nil)
)
