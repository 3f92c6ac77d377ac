package pluginrpc

import (
	"context"
	"time"

	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
	"github.com/keelmq/keel/sdk"
)

// hostServer serves a Host to one plugin over its brokered connection.
type hostServer struct {
	pluginpb.UnimplementedHostServer
	h sdk.Host
}

func (s *hostServer) Positions(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Positions, error) {
	p, err := s.h.Positions(ctx)
	if err != nil {
		return nil, pluginwire.ToStatus(err)
	}
	return pluginwire.PositionsToPB(p), nil
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
			return pluginwire.ToStatus(err)
		}
		if gap := time.Since(last); gap < watchMinGap {
			time.Sleep(watchMinGap - gap)
			if c, err = s.h.WaitCommitted(stream.Context(), after); err != nil {
				return pluginwire.ToStatus(err)
			}
		}
		if err := stream.Send(&pluginpb.Offset{Offset: c}); err != nil {
			return err
		}
		last = time.Now()
		after = c
	}
}

// AwaitCommitted answers one WaitCommitted.
func (s *hostServer) AwaitCommitted(ctx context.Context, r *pluginpb.Offset) (*pluginpb.Offset, error) {
	return pluginwire.OffsetReply(s.h.WaitCommitted(ctx, r.GetOffset()))
}

func (s *hostServer) Commit(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Offset, error) {
	return pluginwire.OffsetReply(s.h.Commit(ctx))
}

func (s *hostServer) Flush(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Offset, error) {
	return pluginwire.OffsetReply(s.h.Flush(ctx))
}

func (s *hostServer) FlushAfter(ctx context.Context, r *pluginpb.Offset) (*pluginpb.Offset, error) {
	if fa, ok := s.h.(sdk.FlushAfterer); ok {
		return pluginwire.OffsetReply(fa.FlushAfter(ctx, r.GetOffset()))
	}
	return pluginwire.OffsetReply(sdk.WaitThenFlush(ctx, s.h, r.GetOffset()))
}

// ReadLog caps the answer at half the message limit.
func (s *hostServer) ReadLog(ctx context.Context, r *pluginpb.ReadLogRequest) (*pluginpb.Bytes, error) {
	mb := min(r.GetMaxBytes(), pluginwire.MaxMsg/2)
	return pluginwire.BytesReply(s.h.ReadLog(ctx, r.GetFrom(), int(mb)))
}

func (s *hostServer) AppendLog(ctx context.Context, r *pluginpb.AppendLogRequest) (*pluginpb.Empty, error) {
	return pluginwire.EmptyReply(s.h.AppendLog(ctx, r.GetOffset(), r.GetData()))
}

func (s *hostServer) TruncateLog(ctx context.Context, r *pluginpb.Offset) (*pluginpb.Empty, error) {
	return pluginwire.EmptyReply(s.h.TruncateLog(ctx, r.GetOffset()))
}

func (s *hostServer) ReadRecord(ctx context.Context, r *pluginpb.Offset) (*pluginpb.Bytes, error) {
	return pluginwire.BytesReply(s.h.ReadRecord(ctx, r.GetOffset()))
}

func (s *hostServer) Epochs(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.EpochList, error) {
	es, err := s.h.Epochs(ctx)
	if err != nil {
		return nil, pluginwire.ToStatus(err)
	}
	return pluginwire.EpochsToPB(es), nil
}

func (s *hostServer) SetEpochs(ctx context.Context, r *pluginpb.EpochList) (*pluginpb.Empty, error) {
	return pluginwire.EmptyReply(s.h.SetEpochs(ctx, pluginwire.EpochsFromPB(r)))
}

func (s *hostServer) MetaSnapshot(ctx context.Context, _ *pluginpb.Empty) (*pluginpb.Bytes, error) {
	return pluginwire.BytesReply(s.h.MetaSnapshot(ctx))
}

func (s *hostServer) MetaApply(ctx context.Context, r *pluginpb.Bytes) (*pluginpb.Empty, error) {
	return pluginwire.EmptyReply(s.h.MetaApply(ctx, r.GetData()))
}

func (s *hostServer) ReportReplication(ctx context.Context, r *pluginpb.ReplicationState) (*pluginpb.Empty, error) {
	return pluginwire.EmptyReply(s.h.ReportReplication(ctx, replicationStateFromPB(r)))
}

func (s *hostServer) Log(ctx context.Context, r *pluginpb.LogBatch) (*pluginpb.Empty, error) {
	for _, l := range r.GetLines() {
		s.h.Log(ctx, int(l.GetLevel()), l.GetMsg(), l.GetAttrs())
	}
	return &pluginpb.Empty{}, nil
}
