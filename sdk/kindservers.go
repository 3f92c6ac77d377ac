package sdk

import (
	"context"
	"math"

	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
)

// lifecycle serves Configure, Start and Stop of one kind; every kind's
// service embeds it. (Each service embeds its generated Unimplemented
// type one level deeper, through unimplemented*, so that lifecycle's
// methods are the ones promoted.)
type lifecycle struct {
	srv  *pluginServer
	kind Kind
}

func (l lifecycle) Configure(ctx context.Context, r *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	return l.srv.configure(ctx, l.kind, r)
}

func (l lifecycle) Start(ctx context.Context, r *pluginpb.StartRequest) (*pluginpb.Empty, error) {
	return pluginwire.EmptyReply(l.srv.start(ctx, l.kind, r))
}

func (l lifecycle) Stop(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Empty, error) {
	return pluginwire.EmptyReply(l.srv.stop(ctx, l.kind))
}

type (
	unimplementedFlush struct {
		pluginpb.UnimplementedFlushStrategyServer
	}
	unimplementedReplication struct {
		pluginpb.UnimplementedReplicatorServer
	}
	unimplementedIndex struct {
		pluginpb.UnimplementedIndexerServer
	}
)

// flushServer is the FlushStrategy service: the lifecycle only (the
// policy travels in Configure's reply).
type flushServer struct {
	lifecycle
	unimplementedFlush
}

// replicatorServer is the Replicator service.
type replicatorServer struct {
	lifecycle
	unimplementedReplication
}

func (r *replicatorServer) Promote(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.EpochNumber, error) {
	pr, err := optional[Promoter](r.srv.p, "promote")
	if err != nil {
		return nil, err
	}
	e, err := pr.Promote(ctx)
	if err != nil {
		return nil, pluginwire.ToStatus(err)
	}
	return &pluginpb.EpochNumber{Epoch: e}, nil
}

func (r *replicatorServer) ForceWrites(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Empty, error) {
	fw, err := optional[ForceWriter](r.srv.p, "force writes")
	if err != nil {
		return nil, err
	}
	return pluginwire.EmptyReply(fw.ForceWrites(ctx))
}

// indexerServer is the Indexer service.
type indexerServer struct {
	lifecycle
	unimplementedIndex
}

func (x *indexerServer) Index(ctx context.Context, r *pluginpb.IndexRequest) (*pluginpb.Empty, error) {
	batch := make([]Record, len(r.GetRecords()))
	for i, rec := range r.GetRecords() {
		batch[i] = recordFromPB(rec)
	}
	return pluginwire.EmptyReply(x.srv.p.(Indexer).Index(ctx, batch))
}

func (x *indexerServer) Sync(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Empty, error) {
	return pluginwire.EmptyReply(x.srv.p.(Indexer).Sync(ctx))
}

func (x *indexerServer) Query(ctx context.Context, r *pluginpb.QueryRequest) (*pluginpb.Offsets, error) {
	q := Query{Topic: r.GetTopic(), Key: r.GetKey(), Begin: r.GetBegin(), End: r.GetEnd(), Max: int(min(r.GetMax(), math.MaxInt32))}
	offs, err := x.srv.p.(Indexer).Query(ctx, q)
	if err != nil {
		return nil, pluginwire.ToStatus(err)
	}
	return &pluginpb.Offsets{Offsets: offs}, nil
}
