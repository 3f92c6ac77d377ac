package host

import (
	"errors"
	"fmt"
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
	for _, e := range []error{record.ErrBadCRC, record.ErrLengthMismatch, record.ErrBadField, core.ErrSizeMismatch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
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
	if re := (*core.ReadError)(nil); errors.As(err, &re) {
		f.qoff, f.phys = re.QueueOffset, re.PhysOffset
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
