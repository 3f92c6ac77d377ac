package core

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
)

// tailLoad appends batches of small records from producers goroutines until
// total bytes are committed, with no flush strategy and no periodic
// checkpoint: only the tail keeper flushes and checkpoints. It returns the
// largest TailBehind seen and the size of one batch.
func tailLoad(t *testing.T, s *Store, producers int, total int64) (maxF, maxD, batchBytes int64) {
	t.Helper()
	batch := make([]*record.Message, 16)
	for i := range batch {
		batch[i] = msg("T", 0, fmt.Sprintf("%0120d", i)) // ~128 B bodies
	}
	var stop atomic.Bool
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		for !stop.Load() {
			f, d := s.TailBehind()
			maxF, maxD = max(maxF, f), max(maxD, d)
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, producers)
	var bb atomic.Int64
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			msgs := make([]*record.Message, len(batch))
			for i := range msgs {
				m := *batch[i]
				m.QueueID = int32(p)
				msgs[i] = &m
			}
			var res []AppendResult
			for s.Positions().Committed < total {
				var err error
				if res, err = s.AppendBatch(msgs, res[:0]); err != nil {
					errs[p] = err
					return
				}
				bb.Store(res[len(res)-1].End() - res[0].PhysOffset)
			}
		}(p)
	}
	wg.Wait()
	stop.Store(true)
	sampled.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return maxF, maxD, bb.Load()
}

func tailOptions(fs vfs.FS, dir string, bound int64) Options {
	o := testOptions(fs, dir)
	o.SegmentSize = 1 << 20
	o.CQEntriesPerFile = 4096
	o.VerifyWindow = 16 << 10
	o.RecoveryTail = bound
	o.CheckpointEvery = time.Hour // only the tail keeper checkpoints
	return o
}

// TestRecoveryTailBound: under a full-speed load with nothing else flushing
// or checkpointing, the log never runs more than the bound (plus the
// batches in flight) ahead of the durable checkpoint, and a crash then
// costs recovery the bound, not the store: it scans and re-dispatches at
// most that much of a store many times larger. Without the bound the same
// load leaves the whole store to scan, so the test fails if the keeper or
// the stall stops working.
func TestRecoveryTailBound(t *testing.T) {
	const producers = 4
	const bound = 256 << 10
	const total = 16 << 20
	for _, tc := range []struct {
		name  string
		bound int64
	}{{"bounded", bound}, {"unbounded", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashFS(3)
			o := tailOptions(fs, "/tail", tc.bound)
			s := mustOpen(t, o)
			maxF, maxD, bb := tailLoad(t, s, producers, total)
			// Each append in flight may add its batch and, when it rolls to
			// the next segment, the BLANK padding the previous one (less
			// than a batch).
			slack := 2 * int64(producers) * bb
			end := s.Positions().Committed
			if _, err := s.Flush(); err != nil { // durable, but not checkpointed
				t.Fatal(err)
			}
			s.abandon()
			fs.CrashWith(vfs.CrashOptions{})
			s = mustOpen(t, o)
			defer s.Close()
			rec := s.Recovery()
			scanned, redispatch := rec.End-rec.ScanFrom, rec.Redispatch
			t.Logf("store %d B: max unflushed %d, undispatched %d above the checkpoint; recovery scanned %d, re-dispatches %d (bound %d, batch %d)",
				end, maxF, maxD, scanned, redispatch, tc.bound, bb)
			if tc.bound < 0 {
				if scanned < end/2 {
					t.Fatalf("without the bound recovery scanned only %d of %d bytes: the test no longer shows the bound's effect", scanned, end)
				}
				return
			}
			if maxF > bound+slack || maxD > bound+slack {
				t.Fatalf("tail ran %d unflushed / %d undispatched bytes ahead of the checkpoint, bound %d + %d in flight", maxF, maxD, bound, slack)
			}
			if limit := int64(bound) + slack + 4*o.VerifyWindow; scanned > limit || redispatch > int64(bound)+slack {
				t.Fatalf("recovery scanned %d and re-dispatches %d bytes of a %d-byte store; bound %d", scanned, redispatch, end, limit)
			}
			if rec.End < s.ckptFlushed.Load() || rec.End > end {
				t.Fatalf("recovered end %d outside [checkpoint %d, committed %d]", rec.End, s.ckptFlushed.Load(), end)
			}
		})
	}
}

// blockingListener holds every Dispatch until released.
type blockingListener struct{ release chan struct{} }

func (l *blockingListener) Dispatch([]DispatchRecord) error { <-l.release; return nil }
func (l *blockingListener) Sync() error                     { return nil }

// TestWriteStallOnDispatch: when the dispatcher cannot keep up (here a
// listener that blocks), appends stop at the bound, fail with ErrBusy after
// StallTimeout, count as stalls, and go on once dispatch moves again.
func TestWriteStallOnDispatch(t *testing.T) {
	l := &blockingListener{release: make(chan struct{})}
	o := tailOptions(vfs.NewCrashFS(4), "/stall", 64<<10)
	o.Listeners = []DispatchListener{l}
	o.StallTimeout = 200 * time.Millisecond
	s := mustOpen(t, o)
	defer s.Close()
	var err error
	var n int
	for n = 0; n < 10000; n++ {
		if _, err = s.Append(msg("T", 0, fmt.Sprintf("%0200d", n))); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("after %d appends with dispatch blocked: %v, want ErrBusy", n, err)
	}
	if _, d := s.TailBehind(); d < o.RecoveryTail || d > o.RecoveryTail+1024 {
		t.Fatalf("undispatched tail %d at the stall, bound %d", d, o.RecoveryTail)
	}
	st := s.Stalls()
	if st.Count == 0 || st.TimedOut != 1 || st.Duration < o.StallTimeout {
		t.Fatalf("stalls %+v, want one timed out after %v", st, o.StallTimeout)
	}
	close(l.release)
	if _, err := s.Append(msg("T", 0, "after")); err != nil {
		t.Fatalf("append once dispatch moves again: %v", err)
	}
}

// TestOpenWithLargeRedispatchTakesAppends: a store that opens with much
// more to re-dispatch than the bound (here a checkpoint rebuilt by Repair,
// dispatched at the log's start, and a dispatcher that cannot move) still
// takes appends at once: what Open recovered is not charged to them. They
// stall only once they themselves run a bound ahead.
func TestOpenWithLargeRedispatchTakesAppends(t *testing.T) {
	fs := vfs.NewCrashFS(8)
	o := tailOptions(fs, "/big", -1)
	s := mustOpen(t, o)
	for s.Positions().Committed < 2<<20 {
		appendN(t, s, 100, "old")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenReadWrite("/big/" + CheckpointFile)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 2*ckptSlot), 0) // both slots invalid
	f.Close()
	if _, err := Repair(o, false); err != nil {
		t.Fatal(err)
	}
	l := &blockingListener{release: make(chan struct{})}
	o.RecoveryTail = 64 << 10
	o.StallTimeout = 100 * time.Millisecond
	o.Listeners = []DispatchListener{l}
	s = mustOpen(t, o)
	defer s.Close()
	defer close(l.release) // before Close, which waits for the dispatcher
	if r := s.Recovery().Redispatch; r < 2<<20 {
		t.Fatalf("re-dispatch %d bytes, want the whole 2 MiB log", r)
	}
	if _, err := s.Append(msg("T", 0, "new")); err != nil {
		t.Fatalf("first append after opening with a large re-dispatch: %v", err)
	}
	var n int
	for n = 0; n < 10000; n++ {
		if _, err = s.Append(msg("T", 0, fmt.Sprintf("%0200d", n))); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "recovery tail") {
		t.Fatalf("after %d appends with dispatch blocked: %v, want ErrBusy", n, err)
	}
	if grown := s.Positions().Committed - s.Recovery().End; grown < o.RecoveryTail || grown > o.RecoveryTail+1024 {
		t.Fatalf("appends stalled %d bytes past the recovered end, want the bound %d", grown, o.RecoveryTail)
	}
}

// failingSync is a listener whose Sync always fails.
type failingSync struct{}

func (failingSync) Dispatch([]DispatchRecord) error { return nil }
func (failingSync) Sync() error                     { return errors.New("indexer cannot sync") }

// TestFailingListenerSyncKeepsFlushedProgress: an indexer that cannot sync
// stops the checkpoint's dispatched offset (its records are not durable in
// it), not its flushed offset; appends stall on the dispatched bound, and
// the error says why.
func TestFailingListenerSyncKeepsFlushedProgress(t *testing.T) {
	o := tailOptions(vfs.NewCrashFS(9), "/fs", 64<<10)
	o.Listeners = []DispatchListener{failingSync{}}
	o.StallTimeout = 100 * time.Millisecond
	s := mustOpen(t, o)
	defer s.Close()
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		_, err = s.Append(msg("T", 0, fmt.Sprintf("%0200d", i)))
	}
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "indexer cannot sync") {
		t.Fatalf("appends with an indexer that cannot sync: %v, want ErrBusy naming the sync error", err)
	}
	if err := s.Checkpoint(); err == nil {
		t.Fatal("Checkpoint succeeded with a failing listener")
	}
	f, _ := s.TailBehind()
	if f >= o.RecoveryTail {
		t.Fatalf("unflushed tail %d at the bound: the failing indexer stopped the flushed offset too", f)
	}
	if s.ckptFlushed.Load() == 0 || s.ckptDispatched.Load() != 0 {
		t.Fatalf("checkpoint flushed %d, dispatched %d: want flushed progress recorded, dispatched held at 0",
			s.ckptFlushed.Load(), s.ckptDispatched.Load())
	}
}
