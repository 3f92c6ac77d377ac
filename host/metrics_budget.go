package host

import "github.com/keelmq/keel/host/remoting"

// registerAdminMetrics adds the remoting servers' request memory budget to
// the node's metrics, computed at scrape time over the distinct budgets of
// n.servers (the listeners share one when configured so):
//
//	keel_remoting_request_buffered_bytes        bytes of requests held now
//	keel_remoting_request_buffered_peak_bytes   the most ever held
//	keel_remoting_request_budget_bytes          the budget
//	keel_remoting_request_budget_waits_total    reads that waited for room
//	keel_remoting_request_budget_refused_total  frames larger than the budget
//	keel_remoting_requests_refused_total        requests access control refused (acl)
//
// It is called once, by startAdmin, after the servers exist.
func registerAdminMetrics(n *Node) {
	sum := func(f func(remoting.BudgetStats) float64) func() float64 {
		return func() float64 {
			var v float64
			seen := map[*remoting.Budget]bool{}
			for _, s := range n.servers {
				if b := s.Budget(); !seen[b] {
					seen[b] = true
					v += f(b.Stats())
				}
			}
			return v
		}
	}
	set := n.metrics.set
	set.NewGauge("keel_remoting_request_buffered_bytes", sum(func(s remoting.BudgetStats) float64 { return float64(s.Buffered) }))
	set.NewGauge("keel_remoting_request_buffered_peak_bytes", sum(func(s remoting.BudgetStats) float64 { return float64(s.Peak) }))
	set.NewGauge("keel_remoting_request_budget_bytes", sum(func(s remoting.BudgetStats) float64 { return float64(s.Limit) }))
	set.NewGauge("keel_remoting_request_budget_waits_total", sum(func(s remoting.BudgetStats) float64 { return float64(s.Waits) }))
	set.NewGauge("keel_remoting_request_budget_refused_total", sum(func(s remoting.BudgetStats) float64 { return float64(s.Refused) }))
	set.NewGauge("keel_remoting_requests_refused_total", func() float64 {
		var v uint64
		for _, s := range n.servers {
			v += s.Refused()
		}
		return float64(v)
	})
}
