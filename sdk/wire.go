package sdk

import "github.com/keelmq/keel/internal/pluginpb"

// The conversions only the plugin end of the boundary makes: what the host
// sends is decoded (…FromPB), what the plugin sends is encoded (…ToPB).
// Their inverses are in internal/pluginrpc, the host end; what both ends
// send is converted in internal/pluginwire.

func configFromPB(c *pluginpb.Config) Config {
	return Config{Name: c.GetName(), File: c.GetFile(), Document: c.GetDocument(), Section: c.GetSection(), Role: c.GetRole(),
		DataDir: c.GetDataDir(), Addr: c.GetAddr(), PeerAddr: c.GetPeerAddr(), Secret: c.GetSecret()}
}

func flushPolicyToPB(p FlushPolicy) *pluginpb.FlushPolicy {
	return &pluginpb.FlushPolicy{WaitFlush: p.WaitFlush, TimeoutNanos: int64(p.Timeout), VisibleAfterFlush: p.VisibleAfterFlush, WriteBuffer: p.WriteBuffer}
}

func replicationPolicyToPB(p ReplicationPolicy) *pluginpb.ReplicationPolicy {
	return &pluginpb.ReplicationPolicy{WaitReplicas: int32(p.WaitReplicas), TimeoutNanos: int64(p.Timeout), VisibleAfterReplicated: p.VisibleAfterReplicated,
		AllowFewer: p.AllowFewer, MinReplicas: int32(p.MinReplicas)}
}

func recordFromPB(r *pluginpb.Record) Record {
	return Record{Topic: r.GetTopic(), QueueID: r.GetQueueId(), QueueOffset: r.GetQueueOffset(), PhysOffset: r.GetPhysOffset(), Size: r.GetSize(),
		TagsCode: r.GetTagsCode(), StoreTimestamp: r.GetStoreTimestamp(), SysFlag: r.GetSysFlag(), Keys: r.GetKeys(), UniqKey: r.GetUniqKey()}
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
