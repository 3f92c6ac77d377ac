package host

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
)

// A read that fails on a damaged record fails the same way every time:
// a consumer stuck on it retries the pull every few seconds, for ever. So
// the operator is told once per damaged record — one ERROR line naming
// topic, queue, queue offset and physical offset, and one increment of
// keel_read_corrupt_records_total — not once per retry.

// maxReadFaults bounds the remembered faults; past it every fault is
// reported again (a store with that many damaged records has bigger
// problems than a noisy log).
const maxReadFaults = 4096

// readFault names one failed read: a consume-queue position (queue >= 0)
// or, for a lookup by physical offset, queue -1.
type readFault struct {
	topic string
	queue int32
	qoff  int64
	phys  int64 // -1 when unknown
}

// readFaults remembers the faults already reported.
type readFaults struct {
	mu   sync.Mutex
	seen map[readFault]struct{}
}

// damaged reports whether err says stored bytes are damaged: a record
// whose framing was recognised (its magic code is valid) but whose body
// CRC, lengths or fields are wrong, or a record whose TOTALSIZE disagrees
// with the consume queue entry pointing at it. A bad magic code or
// zeroed bytes are not counted: a lookup at an offset that is not a
// record's start sees those too.
func damaged(err error) bool {
	for _, e := range []error{record.ErrBadCRC, record.ErrLengthMismatch, record.ErrBadField} {
		if errors.Is(err, e) {
			return true
		}
	}
	return sizeMismatchRE.MatchString(err.Error())
}

// sizeMismatchRE matches core's GetMessages error for a record whose
// TOTALSIZE disagrees with its consume queue entry, and captures the
// queue offset and the physical offset it names ("read message
// T/q@QOFF at PHYS: record at PHYS is not N bytes ..."). core wraps it
// in ErrOffset only, with no typed error carrying the offsets, so the
// text is parsed; TestPullOnDamagedTotalSizeReportedOnce pins the format.
var sizeMismatchRE = regexp.MustCompile(`@(\d+) at (\d+): record at \d+ is not \d+ bytes`)

// locate returns the queue offset and physical offset a GetMessages
// error names, or ok false.
func locate(err error) (qoff, phys int64, ok bool) {
	m := sizeMismatchRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, 0, false
	}
	q, err1 := strconv.ParseInt(m[1], 10, 64)
	p, err2 := strconv.ParseInt(m[2], 10, 64)
	return q, p, err1 == nil && err2 == nil
}

// report logs and counts f unless it was reported before. It returns
// whether it reported.
func (r *readFaults) report(n *Node, f readFault, err error) bool {
	r.mu.Lock()
	if _, ok := r.seen[f]; ok {
		r.mu.Unlock()
		return false
	}
	if r.seen == nil {
		r.seen = map[readFault]struct{}{}
	}
	if len(r.seen) < maxReadFaults {
		r.seen[f] = struct{}{}
	}
	r.mu.Unlock()
	n.metrics.corruptReads.Inc()
	if f.queue < 0 {
		n.log.Error("damaged record: a lookup by offset is refused (run `keel store inspect --crc` on this store)",
			"phys_offset", f.phys, "err", err)
		return true
	}
	n.log.Error("damaged record: consumers of this queue are stuck at it until it is repaired (run `keel store inspect --crc` on this store)",
		"topic", f.topic, "queue", f.queue, "queue_offset", f.qoff, "phys_offset", f.phys, "err", err)
	return true
}

// readFailed reports a failed pull read of topic/queueID at offset (once
// per damaged record; other failures, such as I/O errors, once per
// queue position) and returns err, wrapped with remoting.ErrCorrupt when
// the record is damaged.
func (b backend) readFailed(topic string, queueID int32, offset int64, maxCount int, err error) error {
	f := readFault{topic: topic, queue: queueID, qoff: offset, phys: -1}
	if q, p, ok := locate(err); ok {
		f.qoff, f.phys = q, p
	}
	if !damaged(err) {
		// Not a damaged record (I/O error, store closed): logged once
		// per position, not counted as damage.
		if !errors.Is(err, core.ErrClosed) {
			b.n.metrics.readFaults.logOnce(b.n, f, err)
		}
		return err
	}
	err = wrapCorrupt(err)
	b.n.metrics.readFaults.report(b.n, f, err)
	return err
}

// logOnce logs a read failure that is not damage once per position.
func (r *readFaults) logOnce(n *Node, f readFault, err error) {
	f.phys = -2 // a key distinct from the damage report's
	r.mu.Lock()
	_, ok := r.seen[f]
	if !ok {
		if r.seen == nil {
			r.seen = map[readFault]struct{}{}
		}
		if len(r.seen) < maxReadFaults {
			r.seen[f] = struct{}{}
		}
	}
	r.mu.Unlock()
	if !ok {
		n.log.Error("pull read failed", "topic", f.topic, "queue", f.queue, "queue_offset", f.qoff, "err", err)
	}
}

func wrapCorrupt(err error) error { return fmt.Errorf("%w: %w", remoting.ErrCorrupt, err) }
