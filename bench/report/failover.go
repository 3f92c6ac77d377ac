package report

import (
	"fmt"
	"io"
)

// Failover is one row of the failover part (package bench/failover): a
// system and replication setting, Repeats runs of "kill the leader under
// load". Times are from the kill, in ms; the medians are over the runs
// in which the event happened (a run in which it did not counts in
// Missed). Added within schema version 1; absent from older files.
type Failover struct {
	// System is "keel" or "nats-jetstream".
	System string `json:"system"`
	// Replication is keel's replication plugin ("async", "sync") or "R3".
	Replication string `json:"replication"`
	// Crash is how the leader failed: "kill9" (SIGKILL; its sockets
	// close at once) or "pause" (SIGSTOP; a hung node, noticed only by
	// timeouts).
	Crash     string `json:"crash"`
	Status    string `json:"status"` // "ok", "error"
	Note      string `json:"note,omitempty"`
	Producers int    `json:"producers"`
	BodyBytes int    `json:"body_bytes"`
	Repeats   int    `json:"repeats"`
	// FirstStoredMs: first response from the new leader that stored a
	// message (keel: any status but an error, SLAVE_NOT_AVAILABLE
	// included); FirstOKMs: first SEND_OK (NATS: first publish ack, the
	// same); ConsumerResumeMs: first message born after the kill that
	// the consumer received. Median, min and max over runs.
	FirstStoredMs    float64 `json:"first_stored_ms"`
	FirstOKMs        float64 `json:"first_ok_ms"`
	FirstOKMsMin     float64 `json:"first_ok_ms_min"`
	FirstOKMsMax     float64 `json:"first_ok_ms_max"`
	ConsumerResumeMs float64 `json:"consumer_resume_ms"`
	// Missed counts runs without a first SEND_OK within the wait;
	// OldMasterResumed runs in which it came from the old master,
	// restarted (FailoverRun.OldMasterResumed).
	Missed           int `json:"missed"`
	OldMasterResumed int `json:"old_master_resumed,omitempty"`
	// Acked is the median of acknowledged messages per run; AckedLost
	// the largest number lost in one run, AckedLostRuns each run's.
	Acked         int64         `json:"acked"`
	AckedLost     int64         `json:"acked_lost"`
	AckedLostRuns []int64       `json:"acked_lost_runs,omitempty"`
	Runs          []FailoverRun `json:"runs,omitempty"`
}

// FailoverRun is one run; -1 for an event that did not happen.
type FailoverRun struct {
	FirstStoredMs    float64 `json:"first_stored_ms"`
	FirstOKMs        float64 `json:"first_ok_ms"`
	ConsumerResumeMs float64 `json:"consumer_resume_ms"`
	Acked            int64   `json:"acked"`
	AckedLost        int64   `json:"acked_lost"`
	// Errors counts failed attempts (keel: also stored-but-not-OK
	// statuses); FirstError is the first after the kill.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// OldMasterResumed: the first SEND_OK came from the old master,
	// restarted, which the controller had kept master (no election).
	OldMasterResumed bool `json:"old_master_resumed,omitempty"`
}

// Key names the row.
func (f Failover) Key() string { return f.System + "/" + f.Replication + "/" + f.Crash }

func msOrNone(ms float64) string {
	if ms < 0 {
		return "never"
	}
	return msStr(ms)
}

// writeFailoverMD writes the part's section of report.md.
func writeFailoverMD(p func(format string, a ...any), rows []Failover) {
	p("## Failover (kill -9 the leader under load)\n\n")
	p("keel: one namesrv+controller process and a two-broker group in cluster mode; the master is killed (kill9: SIGKILL) " +
		"or paused (pause: SIGSTOP, then killed), and restarted once the route names the new master (it rejoins as slave). NATS: three JetStream servers, an R3 stream, the stream leader's process " +
		"killed or paused. Times from the kill, medians over runs (min–max of first SEND_OK).\n\n")
	p("| system | replication | crash | status | first stored | first SEND_OK | range | consumer resumes | acked (median) | acked lost (max) | runs | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range rows {
		if f.Status != "ok" {
			p("| %s | %s | %s | %s | | | | | | | | %s |\n", f.System, f.Replication, f.Crash, f.Status, f.Note)
			continue
		}
		old := ""
		if f.OldMasterResumed > 0 {
			old = fmt.Sprintf(", %d old master kept", f.OldMasterResumed)
		}
		p("| %s | %s | %s | ok | %s | %s | %s–%s | %s | %d | %d | %d (%d missed%s) | %s |\n", f.System, f.Replication, f.Crash, msOrNone(f.FirstStoredMs),
			msOrNone(f.FirstOKMs), msOrNone(f.FirstOKMsMin), msOrNone(f.FirstOKMsMax), msOrNone(f.ConsumerResumeMs), f.Acked, f.AckedLost,
			f.Repeats, f.Missed, old, f.Note)
	}
	p("\n")
}

// writeFailoverTable writes the part's lines of the terminal summary.
func writeFailoverTable(w io.Writer, rows []Failover) {
	for _, f := range rows {
		if f.Status != "ok" {
			fmt.Fprintf(w, "failover %s: %s: %s\n", f.Key(), f.Status, truncate(f.Note, 80))
			continue
		}
		fmt.Fprintf(w, "failover %s: first SEND_OK %s (stored %s), consumer %s, %d acked lost of %d\n", f.Key(), msOrNone(f.FirstOKMs),
			msOrNone(f.FirstStoredMs), msOrNone(f.ConsumerResumeMs), f.AckedLost, f.Acked)
	}
}
