package sdk

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/keelmq/keel/internal/pluginpb"
	"github.com/keelmq/keel/internal/pluginwire"
)

// reporter sends an external replicator's ReportReplication calls. Over a
// lane, a report that keeps the last sent fence (Fenced and Reason) is
// sent in the background, newest first: the replicator does not wait a
// round trip per acknowledgement (it goes on streaming while the host
// receives the report), and reports made while one is in flight coalesce
// into the newest, which is all the host keeps (its AckedOffset never
// decreases). A report that changes the fence is sent synchronously,
// after every earlier one, so once it returns the host refuses (or takes)
// writes as it says. Without a lane every report is synchronous.
type reporter struct {
	h *remoteHost

	mu     sync.Mutex
	idle   *sync.Cond
	busy   bool                       // a send is in progress
	next   *pluginpb.ReplicationState // the newest report not yet sent
	sent   bool                       // a report reached the host (fenced and reason are its)
	fenced bool
	reason string
}

// reportTimeout bounds one background send.
const reportTimeout = 10 * time.Second

func newReporter(h *remoteHost) *reporter {
	r := &reporter{h: h}
	r.idle = sync.NewCond(&r.mu)
	return r
}

func (r *reporter) report(ctx context.Context, st ReplicationState) error {
	pb := replicationStateToPB(st)
	if r.h.lane == nil {
		return pluginwire.EmptyResult(r.h.c.ReportReplication(ctx, pb))
	}
	r.mu.Lock()
	if r.sent && st.Fenced == r.fenced && st.Reason == r.reason {
		r.next = pb
		if !r.busy {
			r.busy = true
			go r.sendLoop()
		}
		r.mu.Unlock()
		return nil
	}
	for r.busy {
		r.idle.Wait()
	}
	r.busy, r.next = true, nil
	r.mu.Unlock()
	err := pluginwire.EmptyResult(r.h.c.ReportReplication(ctx, pb))
	r.mu.Lock()
	if err == nil {
		r.sent, r.fenced, r.reason = true, st.Fenced, st.Reason
	}
	r.busy = false
	r.idle.Broadcast()
	r.mu.Unlock()
	return err
}

// sendLoop sends the newest queued report until none is left.
func (r *reporter) sendLoop() {
	for {
		r.mu.Lock()
		pb := r.next
		r.next = nil
		if pb == nil {
			r.busy = false
			r.idle.Broadcast()
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(r.h.ctx, reportTimeout)
		_, err := r.h.c.ReportReplication(ctx, pb)
		cancel()
		if err != nil && r.h.ctx.Err() == nil {
			r.h.Log(context.Background(), int(slog.LevelWarn), "report replication state to the host", map[string]string{"err": pluginwire.FromStatus(err).Error()})
		}
	}
}
