package pluginrpc

import (
	"time"

	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/sdk"
)

// The conversions only the host end of the boundary makes: what the host
// sends is encoded (…ToPB), what the plugin sends is decoded (…FromPB).
// Their inverses are in package sdk (wire.go), the plugin end; what both
// ends send is converted in internal/pluginwire.

// configToPB sends every field of c and nothing else: the plugin receives
// exactly the sdk.Config the host built for it.
func configToPB(c sdk.Config) *pluginpb.Config {
	return &pluginpb.Config{Name: c.Name, File: c.File, Document: c.Document, Section: c.Section, Role: c.Role,
		DataDir: c.DataDir, Addr: c.Addr, PeerAddr: c.PeerAddr, Secret: c.Secret}
}

func flushPolicyFromPB(p *pluginpb.FlushPolicy) sdk.FlushPolicy {
	return sdk.FlushPolicy{WaitFlush: p.GetWaitFlush(), Timeout: time.Duration(p.GetTimeoutNanos()), VisibleAfterFlush: p.GetVisibleAfterFlush(), WriteBuffer: p.GetWriteBuffer()}
}

func replicationPolicyFromPB(p *pluginpb.ReplicationPolicy) sdk.ReplicationPolicy {
	return sdk.ReplicationPolicy{WaitReplicas: int(p.GetWaitReplicas()), Timeout: time.Duration(p.GetTimeoutNanos()), VisibleAfterReplicated: p.GetVisibleAfterReplicated(),
		AllowFewer: p.GetAllowFewer(), MinReplicas: int(p.GetMinReplicas())}
}

// indexRequest encodes a batch with one allocation for all its records.
func indexRequest(batch []sdk.Record) *pluginpb.IndexRequest {
	recs := make([]pluginpb.Record, len(batch))
	req := &pluginpb.IndexRequest{Records: make([]*pluginpb.Record, len(batch))}
	for i := range batch {
		b := &batch[i]
		recs[i] = pluginpb.Record{Topic: b.Topic, QueueId: b.QueueID, QueueOffset: b.QueueOffset, PhysOffset: b.PhysOffset, Size: b.Size,
			TagsCode: b.TagsCode, StoreTimestamp: b.StoreTimestamp, SysFlag: b.SysFlag, Keys: b.Keys, UniqKey: b.UniqKey}
		req.Records[i] = &recs[i]
	}
	return req
}

func replicationStateFromPB(st *pluginpb.ReplicationState) sdk.ReplicationState {
	out := sdk.ReplicationState{AckedOffset: st.GetAckedOffset(), InSync: int(st.GetInSync()), Fenced: st.GetFenced(), Reason: st.GetReason()}
	for _, r := range st.GetReplicas() {
		var lc time.Time
		if n := r.GetLastContactUnixNanos(); n != 0 {
			lc = time.Unix(0, n)
		}
		out.Replicas = append(out.Replicas, sdk.ReplicaState{ID: r.GetId(), Addr: r.GetAddr(), AckOffset: r.GetAckOffset(), LagBytes: r.GetLagBytes(),
			LagSeconds: r.GetLagSeconds(), InSync: r.GetInSync(), Connected: r.GetConnected(), LastContact: lc})
	}
	return out
}
