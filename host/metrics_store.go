package host

import vm "github.com/VictoriaMetrics/metrics"

// registerStoreMetrics adds the store's recovery-bound and retention
// series, computed at scrape time (0 before the store opens):
//
//	keel_recovery_tail_unflushed_bytes     committed above the durable checkpoint's flushed offset
//	keel_recovery_tail_undispatched_bytes  confirmed above its dispatched offset
//	keel_recovery_tail_bound_bytes         store.recovery_tail: where appends stall
//	keel_write_stalls_total                appends that waited for the tail to shrink
//	keel_write_stall_seconds_total         time they waited
//	keel_write_stall_timeouts_total        appends that failed (store busy) after store.stall_timeout
//	keel_retention_forced_deletions_total  segments deleted before their retention time
//	keel_recovery_seconds                  how long the last Open took
//	keel_recovery_scanned_bytes            bytes it validated
//	keel_recovery_redispatch_bytes         bytes it left to dispatch again
func registerStoreMetrics(s *vm.Set, n *Node) {
	g := func(name string, f func() float64) {
		s.NewGauge(name, func() float64 {
			if n.store == nil {
				return 0
			}
			return f()
		})
	}
	g("keel_recovery_tail_unflushed_bytes", func() float64 { f, _ := n.store.TailBehind(); return float64(f) })
	g("keel_recovery_tail_undispatched_bytes", func() float64 { _, d := n.store.TailBehind(); return float64(d) })
	g("keel_recovery_tail_bound_bytes", func() float64 { return float64(n.store.RecoveryTailBound()) })
	g("keel_write_stalls_total", func() float64 { return float64(n.store.Stalls().Count) })
	g("keel_write_stall_seconds_total", func() float64 { return n.store.Stalls().Duration.Seconds() })
	g("keel_write_stall_timeouts_total", func() float64 { return float64(n.store.Stalls().TimedOut) })
	g("keel_retention_forced_deletions_total", func() float64 { return float64(n.store.ForcedDeletions()) })
	g("keel_recovery_seconds", func() float64 { return n.store.Recovery().Duration.Seconds() })
	g("keel_recovery_scanned_bytes", func() float64 { r := n.store.Recovery(); return float64(r.End - r.ScanFrom) })
	g("keel_recovery_redispatch_bytes", func() float64 { return float64(n.store.Recovery().Redispatch) })
}
