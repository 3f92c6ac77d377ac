package pluginwire

import (
	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/epoch"
	"github.com/keelmq/keel/internal/pluginpb"
)

// PositionsToPB encodes p; Wrote does not cross the boundary.
func PositionsToPB(p core.Positions) *pluginpb.Positions {
	return &pluginpb.Positions{Min: p.Min, Dispatched: p.Dispatched, Confirm: p.Confirm, Flushed: p.Flushed, Committed: p.Committed, Epoch: p.Epoch}
}

// PositionsFromPB decodes p (Wrote 0).
func PositionsFromPB(p *pluginpb.Positions) core.Positions {
	return core.Positions{Min: p.GetMin(), Dispatched: p.GetDispatched(), Confirm: p.GetConfirm(), Flushed: p.GetFlushed(), Committed: p.GetCommitted(), Epoch: p.GetEpoch()}
}

// EpochsToPB encodes an epoch history.
func EpochsToPB(es []epoch.Entry) *pluginpb.EpochList {
	out := &pluginpb.EpochList{Epochs: make([]*pluginpb.Epoch, len(es))}
	for i, e := range es {
		out.Epochs[i] = &pluginpb.Epoch{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

// EpochsFromPB decodes an epoch history.
func EpochsFromPB(l *pluginpb.EpochList) []epoch.Entry {
	out := make([]epoch.Entry, len(l.GetEpochs()))
	for i, e := range l.GetEpochs() {
		out[i] = epoch.Entry{Epoch: e.GetEpoch(), StartOffset: e.GetStartOffset()}
	}
	return out
}
