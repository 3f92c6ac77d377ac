package report

import (
	"fmt"
	"io"
)

// Semantics is the message-semantics part (package bench/semantics):
// timer messages and transactional sends, each beside plain sends to a
// fresh node of the same profile in the same run. Added within schema
// version 1; absent from older files.
type Semantics struct {
	// Profile is the keel profile every node of the part runs.
	Profile string `json:"profile"`
	// Producers, Connections, Depth and BodyBytes are the load of every
	// run (producers are messages in flight).
	Producers   int `json:"producers"`
	Connections int `json:"connections"`
	Depth       int `json:"depth"`
	BodyBytes   int `json:"body_bytes"`
	// Timers and Transactions are nil when not configured.
	Timers       *TimerBench `json:"timers,omitempty"`
	Transactions *TxBench    `json:"transactions,omitempty"`
}

// TimerBench is the timer entry: per run, Requested timer messages with
// delays spread uniformly over [1s, Window] sent by bench/wire's load
// generator (TIMER_DELIVER_MS), and as many plain messages to a fresh
// node.
type TimerBench struct {
	Status    string `json:"status"` // "ok", "error"
	Note      string `json:"note,omitempty"`
	Requested int64  `json:"requested"`
	WindowMs  int64  `json:"window_ms"`
	// SendMsgsPerSec and PlainMsgsPerSec are medians over runs of stored
	// messages per second; SendRatio the median of the runs' ratios
	// (timer over plain; the goal is >= 0.8).
	SendMsgsPerSec  float64 `json:"send_msgs_per_sec"`
	PlainMsgsPerSec float64 `json:"plain_msgs_per_sec"`
	SendRatio       float64 `json:"send_ratio"`
	// Lateness of delivery over all runs' delivered copies: the store
	// time of the copy in the real queue minus the due time, ms (the
	// goal is p99 <= 1000).
	LatenessP50Ms float64 `json:"lateness_p50_ms"`
	LatenessP99Ms float64 `json:"lateness_p99_ms"`
	LatenessMaxMs float64 `json:"lateness_max_ms"`
	// Sums over runs: copies found in the real queues (distinct), extra
	// copies, timers never delivered, copies stored before due.
	Delivered  int64      `json:"delivered"`
	Duplicates int64      `json:"duplicates"`
	Missing    int64      `json:"missing"`
	Early      int64      `json:"early"`
	Runs       []TimerRun `json:"runs,omitempty"`
}

// TimerRun is one timer run and its plain counterpart.
type TimerRun struct {
	// Sent is the timer messages stored; SendMsgsPerSec over the send
	// window, PlainMsgsPerSec of the plain run with the same count.
	Sent            int64   `json:"sent"`
	SendMsgsPerSec  float64 `json:"send_msgs_per_sec"`
	PlainMsgsPerSec float64 `json:"plain_msgs_per_sec"`
	SendP99us       float64 `json:"send_p99_us"`
	PlainP99us      float64 `json:"plain_p99_us"`
	Delivered       int64   `json:"delivered"`
	Duplicates      int64   `json:"duplicates"`
	Missing         int64   `json:"missing"`
	Early           int64   `json:"early"`
	LatenessP50Ms   float64 `json:"lateness_p50_ms"`
	LatenessP99Ms   float64 `json:"lateness_p99_ms"`
	LatenessMaxMs   float64 `json:"lateness_max_ms"`
	// PendingAtSendEnd is how many timers were not yet delivered when the
	// last send was acknowledged.
	PendingAtSendEnd int64 `json:"pending_at_send_end"`
	// Memory of the benchmark process (the node runs in it; the
	// generator's share is fixed): VmRSS and RssAnon from
	// /proc/self/status, and the Go heap in use, before the first send
	// (after priming), after the last send, and after the last delivery;
	// each after returning freed memory to the OS. RssAnon leaves out
	// the mapped commitlog pages VmRSS counts.
	RSSBeforeBytes        int64 `json:"rss_before_bytes"`
	RSSAfterSendBytes     int64 `json:"rss_after_send_bytes"`
	RSSAfterDeliveryBytes int64 `json:"rss_after_delivery_bytes"`
	AnonBeforeBytes       int64 `json:"anon_before_bytes"`
	AnonAfterSendBytes    int64 `json:"anon_after_send_bytes"`
	AnonAfterDeliverBytes int64 `json:"anon_after_delivery_bytes"`
	HeapBeforeBytes       int64 `json:"heap_before_bytes"`
	HeapAfterSendBytes    int64 `json:"heap_after_send_bytes"`
	HeapAfterDeliverBytes int64 `json:"heap_after_delivery_bytes"`
}

// TxBench is the transaction entry: per run, Duration of transactions
// (a half message to SEND_MESSAGE, then END_TRANSACTION commit with the
// offsets of its reply, awaited) and Duration of plain sends by the same
// client against a fresh node.
type TxBench struct {
	Status     string `json:"status"`
	Note       string `json:"note,omitempty"`
	DurationMs int64  `json:"duration_ms"`
	// TxPerSec is the median over runs of committed transactions per
	// second (both requests acknowledged); PlainMsgsPerSec the median of
	// the plain runs; Ratio the median of the runs' ratios.
	TxPerSec        float64 `json:"tx_per_sec"`
	PlainMsgsPerSec float64 `json:"plain_msgs_per_sec"`
	Ratio           float64 `json:"ratio"`
	// Latency of one transaction (half send to commit ack) and of one
	// plain send, over all runs, microseconds.
	TxP50us    float64 `json:"tx_p50_us"`
	TxP99us    float64 `json:"tx_p99_us"`
	PlainP50us float64 `json:"plain_p50_us"`
	PlainP99us float64 `json:"plain_p99_us"`
	// Committed counts acknowledged commits over all runs; Visible the
	// committed messages found in the real queues after each run (equal
	// unless a commit was lost); Errors failed requests of both kinds.
	Committed int64   `json:"committed"`
	Visible   int64   `json:"visible"`
	Errors    int64   `json:"errors"`
	Runs      []TxRun `json:"runs,omitempty"`
}

// TxRun is one transaction run and its plain counterpart.
type TxRun struct {
	TxPerSec        float64 `json:"tx_per_sec"`
	PlainMsgsPerSec float64 `json:"plain_msgs_per_sec"`
}

// writeSemanticsMD writes the part's section of report.md.
func writeSemanticsMD(p func(format string, a ...any), s *Semantics) {
	p("## Message semantics (timers and transactions beside plain sends, same run)\n\n")
	p("Profile %s, %d producers over %d connections × depth %d, %d B bodies; every run on a fresh node in this process.\n\n",
		s.Profile, s.Producers, s.Connections, s.Depth, s.BodyBytes)
	if t := s.Timers; t != nil {
		p("Timers: %d per run, delays uniform over [1s, %s] (TIMER_DELIVER_MS).\n\n", t.Requested, msStr(float64(t.WindowMs)))
		if t.Status != "ok" {
			p("%s: %s\n\n", t.Status, t.Note)
		} else {
			p("| timer msgs/s | plain msgs/s | ratio (goal ≥ 0.8) | lateness p50 | p99 (goal ≤ 1s) | max | delivered | duplicates | missing | early |\n|---|---|---|---|---|---|---|---|---|---|\n")
			p("| %s | %s | %.2f | %s | %s | %s | %d | %d | %d | %d |\n\n", human(t.SendMsgsPerSec), human(t.PlainMsgsPerSec), t.SendRatio,
				msStr(t.LatenessP50Ms), msStr(t.LatenessP99Ms), msStr(t.LatenessMaxMs), t.Delivered, t.Duplicates, t.Missing, t.Early)
			p("| run | sent | pending at send end | VmRSS before → after send → after delivery | RssAnon | Go heap |\n|---|---|---|---|---|---|\n")
			for i, r := range t.Runs {
				p("| %d | %d | %d | %s → %s → %s | %s → %s → %s | %s → %s → %s |\n", i+1, r.Sent, r.PendingAtSendEnd,
					sizeStr(r.RSSBeforeBytes), sizeStr(r.RSSAfterSendBytes), sizeStr(r.RSSAfterDeliveryBytes),
					sizeStr(r.AnonBeforeBytes), sizeStr(r.AnonAfterSendBytes), sizeStr(r.AnonAfterDeliverBytes),
					sizeStr(r.HeapBeforeBytes), sizeStr(r.HeapAfterSendBytes), sizeStr(r.HeapAfterDeliverBytes))
			}
			p("\n")
		}
	}
	if x := s.Transactions; x != nil {
		p("Transactions: half message + END_TRANSACTION commit (awaited), %s per run, against plain sends by the same client.\n\n", msStr(float64(x.DurationMs)))
		if x.Status != "ok" {
			p("%s: %s\n\n", x.Status, x.Note)
		} else {
			p("| tx/s | plain msgs/s | ratio | tx p50 | tx p99 | plain p50 | plain p99 | committed | visible | errors |\n|---|---|---|---|---|---|---|---|---|---|\n")
			p("| %s | %s | %.2f | %s | %s | %s | %s | %d | %d | %d |\n\n", human(x.TxPerSec), human(x.PlainMsgsPerSec), x.Ratio,
				us(x.TxP50us), us(x.TxP99us), us(x.PlainP50us), us(x.PlainP99us), x.Committed, x.Visible, x.Errors)
		}
	}
}

// writeSemanticsTable writes the part's lines of the terminal summary.
func writeSemanticsTable(w io.Writer, s *Semantics) {
	if t := s.Timers; t != nil && t.Status == "ok" {
		fmt.Fprintf(w, "timers %d: %s msg/s (%.2fx plain), lateness p50 %s p99 %s max %s, %d duplicates, %d missing, %d early\n",
			t.Requested, human(t.SendMsgsPerSec), t.SendRatio, msStr(t.LatenessP50Ms), msStr(t.LatenessP99Ms), msStr(t.LatenessMaxMs),
			t.Duplicates, t.Missing, t.Early)
	}
	if x := s.Transactions; x != nil && x.Status == "ok" {
		fmt.Fprintf(w, "transactions: %s tx/s (%.2fx plain, %s msg/s), p99 %s\n", human(x.TxPerSec), x.Ratio, human(x.PlainMsgsPerSec), us(x.TxP99us))
	}
}

// msStr formats milliseconds.
func msStr(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.2fs", ms/1000)
	}
	return fmt.Sprintf("%.0fms", ms)
}
