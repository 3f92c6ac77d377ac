package host

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/schedule"
	"github.com/keelmq/keel/host/timer"
	"github.com/keelmq/keel/sdk/storehost"
)

// The services only a master runs — delayed messages (host/schedule),
// timer messages (host/timer), transaction checks (host/txn,
// transactions.go) — and their one write path and durability rule.

// newSchedule is the delay level delivery service over the node's store:
// it reads the schedule queues, appends through the node's write path (so
// the write gate applies), and counts a delivery durable once it is
// flushed (the service asks for the flush, whatever the flush strategy)
// and acknowledged by the node's policy (sdk/storehost Ack).
func (n *Node) newSchedule() *schedule.Service {
	return schedule.New(schedule.Config{
		Levels:  n.prof.Store.DelayLevels(),
		Log:     n.store,
		Offsets: n.store.Meta().DelayOffsets,
		Append:  n.serviceAppend,
		Durable: n.serviceDurable,
		Flush:   n.serviceFlush,
		Logger:  n.log.With("component", "schedule"),
	})
}

// newTimer is the timer message service over the node's store, on the
// delay level service's write path and durability rule, with its index in
// <store.dir>/timer; nil (and a rule that refuses timers) when
// store.timer_enable is false.
func (n *Node) newTimer() (*timer.Service, timer.Rule) {
	st := n.prof.Store
	if !st.TimerEnable {
		return nil, timer.Rule{}
	}
	svc := timer.New(timer.Config{
		Dir:       filepath.Join(st.Dir, "timer"),
		Precision: time.Duration(st.TimerPrecision),
		MaxDelay:  time.Duration(st.TimerMaxDelay),
		Log:       n.store,
		Progress:  n.store.Meta().DelayOffsets,
		Append:    n.serviceAppend,
		Durable:   n.serviceDurable,
		Flush:     n.serviceFlush,
		Logger:    n.log.With("component", "timer"),
	})
	return svc, svc.Rule()
}

// scheduleFlushWait bounds one wait for a delivered delayed message to be
// flushed; the service waits again after it.
const scheduleFlushWait = 10 * time.Second

// startMasterServices starts what only a master runs: delivering delayed
// and timer messages and checking undecided transactions. It is called once
// this node serves as master: at start on a master, and on Promote. A
// demotion must call stopMasterServices before the node takes a slave's
// role (meanwhile the write gate refuses the services' appends, and they
// retry without moving their offsets).
//
// It fails when the timer service cannot start (its index on disk was
// built with other store.timer_* settings, or cannot be read): at start
// the node then refuses to run, rather than acknowledge timer messages it
// would not deliver. The other services have started by then; the caller
// stops them (Stop, or abortStart).
func (n *Node) startMasterServices() error {
	if n.schedule != nil {
		n.schedule.Start()
	}
	if n.txn != nil {
		n.txn.Start()
	}
	if n.timer != nil {
		if err := n.timer.Start(); err != nil {
			return fmt.Errorf("timer messages: %w", err)
		}
	}
	return nil
}

// stopMasterServices stops the master's services, each persisting its
// progress (schedule.Service.Stop, timer.Service.Stop, txn.Service.Stop).
func (n *Node) stopMasterServices() {
	if n.schedule != nil {
		n.schedule.Stop()
	}
	if n.timer != nil {
		n.timer.Stop()
	}
	if n.txn != nil {
		n.txn.Stop()
	}
}

// serviceAppend is the write path of the master's services: the node's
// own Append, so the write gate and the rewrites apply.
func (n *Node) serviceAppend(msgs []*record.Message) ([]core.AppendResult, error) {
	return backend{n}.Append(context.Background(), msgs)
}

// serviceDurable is the master services' rule for "a delivered message
// is safe": flushed on this machine (the service asks for the flush,
// whatever the flush strategy) and acknowledged by the node's policy
// (sdk/storehost Ack); done(false) after scheduleFlushWait or a failed
// acknowledgement, and the service waits again.
func (n *Node) serviceDurable(end int64, done func(bool)) {
	n.store.OnFlushed(end, scheduleFlushWait, func(ok bool) {
		if !ok {
			done(false)
			return
		}
		n.host.Ack(n.ackPolicy(), end, func(st storehost.AckStatus) { done(st == storehost.AckOK) })
	})
}

// serviceFlush flushes the log for a service that records progress.
func (n *Node) serviceFlush() error {
	_, err := n.store.Flush()
	return err
}
