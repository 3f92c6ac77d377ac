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

	mu      sync.Mutex
	idle    *sync.Cond
	busy    bool                       // a send is in progress
	syncing bool                       // ... and it is a synchronous one (a fence change)
	next    *pluginpb.ReplicationState // the newest report not yet sent
	sent    bool                       // a report reached the host (fenced and reason are its)
	fenced  bool
	reason  string
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
	for r.syncing {
		r.idle.Wait() // no report overtakes, or is judged against, a fence on its way
	}
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
	r.busy, r.syncing, r.next = true, true, nil
	r.mu.Unlock()
	err := pluginwire.EmptyResult(r.h.c.ReportReplication(ctx, pb))
	r.mu.Lock()
	r.syncing = false
	// After an error the host may or may not have applied it: the next
	// report is synchronous too, whatever its fence.
	r.sent, r.fenced, r.reason = err == nil, st.Fenced, st.Reason
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
		if err == nil {
			continue
		}
		if r.h.ctx.Err() != nil {
			r.mu.Lock()
			r.next, r.busy = nil, false
			r.idle.Broadcast()
			r.mu.Unlock()
			return
		}
		r.h.Log(context.Background(), int(slog.LevelWarn), "report replication state to the host (retrying)", map[string]string{"err": pluginwire.FromStatus(err).Error()})
		// The replicator counts this report as made: send it again
		// unless a newer one came, and make the next one synchronous.
		r.mu.Lock()
		if r.next == nil {
			r.next = pb
		}
		r.sent = false
		r.mu.Unlock()
		select {
		case <-r.h.ctx.Done():
		case <-time.After(reportRetry):
		}
	}
}

// reportRetry spaces the retries of a background report that failed.
const reportRetry = 10 * time.Millisecond
