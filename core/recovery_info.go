package core

import (
	"fmt"
	"strings"
	"time"
)

// RecoveryInfo describes what Open did.
type RecoveryInfo struct {
	Crashed       bool          // the abort marker was present
	ScanFrom      int64         // where validation started
	End           int64         // the recovered end of the log
	Truncated     int64         // bytes cut from a torn tail (upper bound: to the end of the segment)
	Redispatch    int64         // bytes to dispatch again
	Duration      time.Duration // time spent in Open
	HadCheckpoint bool
	// Phases is where Open's time went, in order: segments (open the
	// commitlog files), queues (open the consume queues), scan (validate
	// records from ScanFrom), cut (remove what follows the end),
	// truncate-queues, finish (epochs, abort marker, first checkpoint).
	Phases []RecoveryPhase
}

func (r RecoveryInfo) phaseString() string {
	var b strings.Builder
	for i, p := range r.Phases {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", p.Name, p.Took.Round(time.Microsecond))
	}
	return b.String()
}

// RecoveryPhase is one step of Open and its duration.
type RecoveryPhase struct {
	Name string
	Took time.Duration
}

// Recovery reports what Open found and did.
func (s *Store) Recovery() RecoveryInfo { return s.recovery }
