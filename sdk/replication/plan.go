package replication

import (
	"errors"
	"fmt"
	"slices"

	"github.com/keelmq/keel/core/epoch"
	"github.com/keelmq/keel/sdk"
)

// View is one node's log as the epoch handshake compares it: the log holds
// [Min, End) and Epochs is its history (oldest first). Takeovers lists the
// epochs the node knows were begun by a deliberate takeover (a promotion,
// an operator's ForceWrites, or a node reconfigured from slave to master):
// a takeover epoch supersedes any older epoch's records that it does not
// contain.
type View struct {
	Min, End  int64
	Epochs    []sdk.Epoch
	Takeovers []int32
}

// Empty reports whether the log holds no bytes.
func (v View) Empty() bool { return v.End == v.Min }

// LastEpoch is the newest epoch of the history, 0 if it is empty.
func (v View) LastEpoch() int32 {
	if len(v.Epochs) == 0 {
		return 0
	}
	return v.Epochs[len(v.Epochs)-1].Epoch
}

// Action is what a Decision tells the master to do with a replica.
type Action int

// Actions.
const (
	// Stream: the slave truncates its log to From (a no-op when it ends
	// there), adopts History, and the master streams from From.
	Stream Action = iota
	// CatchUp: the master is behind the slave. It refuses writes, pulls
	// the slave's [From, To) and appends it, adopts History, begins a new
	// epoch at To, and decides again.
	CatchUp
	// Fence: the logs conflict in a way only an operator can resolve; the
	// master refuses writes (Reason says why) until ForceWrites or until it
	// is reconfigured as a slave. The replica is disconnected and retries.
	Fence
	// Refuse: the replica cannot be served (Reason says what the operator
	// must do, typically wipe it for a full copy); the master is not
	// affected.
	Refuse
)

func (a Action) String() string {
	switch a {
	case Stream:
		return "stream"
	case CatchUp:
		return "catch-up"
	case Fence:
		return "fence"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is Decide's answer.
type Decision struct {
	Action   Action
	From, To int64
	// History is the slave's new history (Stream) or the master's after
	// the pull (CatchUp).
	History []sdk.Epoch
	Reason  string
}

// Decide compares a master's log with a slave's and says how replication
// proceeds. It is a pure function, the whole of the protocol's safety:
//
//  1. An empty slave copies everything from the master's minimum (a fresh
//     store) or from where it ends, if the master still holds that.
//  2. An empty, fresh master (a wiped disk) catches up from the slave's
//     whole log before it accepts a write: nothing the slave holds is lost
//     and no consumer offset ever points past the master's log.
//  3. Otherwise the consistent point p comes from the epoch histories
//     (epoch.FindConsistentPoint, the slave as the local side). A slave
//     that holds nothing past p streams from p (truncating the master's
//     view of it to p is a no-op).
//  4. A slave's tail past p is cut when the master's last epoch is newer
//     and a takeover epoch lies between the slave's last epoch and the
//     master's: the returning old master case, whether or not the master
//     has written in its takeover epoch yet (so the answer does not
//     depend on whether the new master's first write came before this
//     handshake).
//  5. Otherwise, if only the slave holds bytes past p, the master is
//     behind (it lost data): it catches up from the slave.
//  6. If both hold bytes past p, the master is fenced: both tails may
//     hold acknowledged messages, and an operator chooses (ForceWrites
//     keeps the master's, which records a takeover epoch).
//
// Histories without epochs (logs written before epochs existed) fall back
// to comparing offsets, as classic RocketMQ does, but a slave ahead of the
// master still fences it. Decide never truncates below a node's minimum:
// such cases are refused with the operator action in Reason.
func Decide(master, slave View) Decision {
	switch {
	case slave.Empty():
		from := slave.End
		if slave.End == 0 {
			from = master.Min // a fresh replica: a full copy, not only the last segment
		}
		if from < master.Min || from > master.End {
			return Decision{Action: Refuse, Reason: fmt.Sprintf(
				"the replica's empty log starts at %d, outside this master's log [%d,%d): wipe the replica's store for a full copy",
				from, master.Min, master.End)}
		}
		return Decision{Action: Stream, From: from, History: epochsClip(master.Epochs, from)}
	case master.End == 0:
		return Decision{Action: CatchUp, From: slave.Min, To: slave.End, History: slices.Clone(slave.Epochs),
			Reason: fmt.Sprintf("this master's log is empty while replica holds [%d,%d): catching up from the replica before accepting writes", slave.Min, slave.End)}
	case len(slave.Epochs) == 0 || len(master.Epochs) == 0:
		return decideByOffsets(master, slave)
	}
	p, err := epoch.FindConsistentPoint(toEntries(slave.Epochs), slave.End, toEntries(master.Epochs), master.End)
	if err != nil {
		if errors.Is(err, epoch.ErrNoConsistentPoint) {
			return Decision{Action: Refuse, Reason: fmt.Sprintf("the replica's log shares no epoch with this master's (%v): wipe the replica's store for a full copy, or check it points at the right master", err)}
		}
		return Decision{Action: Refuse, Reason: fmt.Sprintf("epoch histories do not compare: %v", err)}
	}
	slaveExtra, masterExtra := slave.End > p, master.End > p
	lastS, lastM := slave.LastEpoch(), master.LastEpoch()
	superseded := lastM > lastS && takeoverIn(lastS, lastM, master.Takeovers, slave.Takeovers)
	switch {
	case !slaveExtra:
		return streamFrom(master, slave, p)
	case superseded:
		return streamFrom(master, slave, p) // rule 4
	case !masterExtra:
		hist := mergeAt(master.Epochs, slave.Epochs, p)
		if p < slave.Min || epoch.Validate(toEntries(hist)) != nil {
			return Decision{Action: Fence, Reason: fmt.Sprintf(
				"replica holds [%d,%d) beyond this master's log end %d but cannot supply it from %d (its log starts at %d): refusing writes; ForceWrites gives up the replica's data",
				p, slave.End, master.End, p, slave.Min)}
		}
		return Decision{Action: CatchUp, From: p, To: slave.End, History: hist,
			Reason: fmt.Sprintf("replica holds [%d,%d) that this master lacks (lost from its disk?): catching up from the replica before accepting writes", p, slave.End)}
	}
	if lastS > lastM {
		return Decision{Action: Fence, Reason: fmt.Sprintf(
			"replica holds epoch %d, newer than this master's %d, and its log diverges from this one at %d: this node looks like a stale master; reconfigure it as a slave, or ForceWrites to keep this log and drop the replica's [%d,%d)",
			lastS, lastM, p, p, slave.End)}
	}
	return Decision{Action: Fence, Reason: fmt.Sprintf(
		"replica holds [%d,%d) in epoch %d that this master lacks, and this master wrote [%d,%d) since: both may hold acknowledged messages; ForceWrites keeps this master's log and drops the replica's tail",
		p, slave.End, lastS, p, master.End)}
}

// streamFrom streams to a slave after truncating it to p.
func streamFrom(master, slave View, p int64) Decision {
	if p < master.Min {
		return Decision{Action: Refuse, Reason: fmt.Sprintf(
			"the replica ends at %d, below this master's oldest offset %d (deleted by retention): wipe the replica's store for a full copy", p, master.Min)}
	}
	if p < slave.End && p < slave.Min {
		return Decision{Action: Refuse, Reason: fmt.Sprintf(
			"the replica must truncate to %d, below its oldest offset %d: wipe the replica's store for a full copy", p, slave.Min)}
	}
	return Decision{Action: Stream, From: p, History: epochsClip(master.Epochs, p)}
}

// decideByOffsets compares logs of which one has no epoch history.
func decideByOffsets(master, slave View) Decision {
	if slave.End > master.End {
		return Decision{Action: Fence, Reason: fmt.Sprintf(
			"replica holds [%d,%d) beyond this master's log end %d and one side has no epoch history to compare: refusing writes; ForceWrites gives up the replica's data",
			master.End, slave.End, master.End)}
	}
	return streamFrom(master, slave, slave.End)
}

// takeoverIn reports whether some takeover epoch t has lo < t <= hi.
func takeoverIn(lo, hi int32, lists ...[]int32) bool {
	for _, l := range lists {
		for _, t := range l {
			if t > lo && t <= hi {
				return true
			}
		}
	}
	return false
}

// mergeAt returns the master's entries starting below p followed by the
// slave's starting at or after p: the history of the master's log after it
// appended the slave's [p, End).
func mergeAt(master, slave []sdk.Epoch, p int64) []sdk.Epoch {
	var out []sdk.Epoch
	for _, e := range master {
		if e.StartOffset < p {
			out = append(out, e)
		}
	}
	for _, e := range slave {
		if e.StartOffset >= p {
			out = append(out, e)
		}
	}
	return out
}

func epochsClip(es []sdk.Epoch, off int64) []sdk.Epoch {
	return fromEntries(epoch.Clip(toEntries(es), off))
}

func toEntries(es []sdk.Epoch) []epoch.Entry {
	out := make([]epoch.Entry, len(es))
	for i, e := range es {
		out[i] = epoch.Entry{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

func fromEntries(es []epoch.Entry) []sdk.Epoch {
	out := make([]sdk.Epoch, len(es))
	for i, e := range es {
		out[i] = sdk.Epoch{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

// ValidateHistory checks es against the rules of an epoch history
// (epoch.Validate); errors wrap epoch.ErrInvalid.
func ValidateHistory(es []sdk.Epoch) error { return epoch.Validate(toEntries(es)) }
