package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
)

type acked struct {
	topic string
	qid   int32
	body  string
	res   AppendResult
}

// verifyStore checks the invariants every recovered store must keep: every
// record in the log is whole and CRC-valid, consume queues point at records
// of their own topic/queue with their own queue offsets, and queue offsets
// are contiguous.
func verifyStore(t testing.TB, s *Store) {
	t.Helper()
	// A recovered tail beyond the checkpoint is durable (and, under
	// VisibleAfterFlush, visible) only after the next flush.
	if _, err := s.Flush(); err != nil {
		t.Fatalf("flush before verifying: %v", err)
	}
	p := s.Positions()
	// Walk the whole log with CRC checks.
	off := p.Min
	type qk = queueKey
	seen := map[qk]int64{}
	for off < p.Committed {
		seg := s.segmentFor(off)
		if seg == nil {
			t.Fatalf("no segment for %d (committed %d)", off, p.Committed)
		}
		err := seg.view(off-seg.start, min(p.Committed, seg.start+s.opts.SegmentSize)-off, func(b []byte) error {
			for len(b) > 0 {
				n, info, err := record.Check(b, true)
				if err != nil {
					return fmt.Errorf("record at %d: %w", off, err)
				}
				if info.Blank {
					off = seg.start + s.opts.SegmentSize
					return nil
				}
				if info.PhysOffset != off {
					return fmt.Errorf("record at %d claims %d", off, info.PhysOffset)
				}
				k := qk{info.Topic, info.QueueID}
				if want, ok := seen[k]; ok && info.QueueOffset != want {
					return fmt.Errorf("record at %d: %s/%d queue offset %d, want %d (not contiguous)", off, info.Topic, info.QueueID, info.QueueOffset, want)
				}
				seen[k] = info.QueueOffset + 1
				b = b[n:]
				off += int64(n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	drain(t, s)
	for k, next := range seen {
		if got := s.MaxQueueOffset(k.topic, k.qid); got != next {
			t.Fatalf("queue %s/%d max %d, log says %d", k.topic, k.qid, got, next)
		}
		lo := s.MinQueueOffset(k.topic, k.qid)
		g, err := s.GetMessages(k.topic, k.qid, lo, int(next-lo), 1<<30, nil)
		if err != nil {
			t.Fatal(err)
		}
		// No filter and nothing removed: entry i is queue offset lo+i.
		pos := 0
		for i, sz := range g.Sizes {
			r, err := record.Decode(g.Data[pos : pos+int(sz)])
			if err != nil {
				t.Fatalf("queue %s/%d entry %d: %v", k.topic, k.qid, i, err)
			}
			if r.Topic != k.topic || r.QueueID != k.qid || r.QueueOffset != lo+int64(i) {
				t.Fatalf("queue %s/%d entry %d (queue offset %d) points at %s/%d@%d", k.topic, k.qid, i, lo+int64(i), r.Topic, r.QueueID, r.QueueOffset)
			}
			pos += int(sz)
		}
	}
}

// TestPowerCut runs concurrent producers whose acks wait for fsync (a
// group-committing flusher), cuts power at random points, recovers and
// checks that no acknowledged record is lost and every invariant holds.
func TestPowerCut(t *testing.T) {
	cuts := 500
	if testing.Short() {
		cuts = 50
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("KEEL_SEED"); v != "" {
		seed, _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("seed %d (set KEEL_SEED to replay the choices; goroutine timing still varies)", seed)
	rng := rand.New(rand.NewSource(seed))
	fs := vfs.NewCrashFS(seed)
	o := testOptions(fs, "/pc")
	o.SegmentSize = 32 << 10
	o.CQEntriesPerFile = 32
	o.CheckpointEvery = 3 * time.Millisecond
	o.VisibleAfterFlush = rng.Intn(2) == 0
	var all []acked
	lastCut, total := 0, 0
	const cutsPerFS = 50 // a crash costs time in proportion to the bytes stored
	for cut := 0; cut < cuts; cut++ {
		if cut > 0 && cut%cutsPerFS == 0 {
			// Check everything acknowledged on this filesystem, then
			// start a fresh one.
			o.FS = fs
			s := mustOpen(t, o)
			for _, a := range all {
				if _, err := s.ReadRecord(a.res.PhysOffset); err != nil {
					t.Fatalf("cut %d: acknowledged record %s lost: %v", cut, a.body, err)
				}
			}
			verifyStore(t, s)
			s.Close()
			total += len(all)
			fs = vfs.NewCrashFS(rng.Int63())
			all, lastCut = nil, 0
		}
		k := vfs.NewKillable(fs) // this incarnation's view: dies at the cut
		o.FS = k
		s, err := Open(o)
		if err != nil {
			t.Fatalf("cut %d: open after crash: %v", cut, err)
		}
		// Every record acknowledged before the last cut must be there; older
		// ones are sampled here and all checked at the end.
		check := all[lastCut:]
		for i := 0; i < 50 && lastCut > 0; i++ {
			check = append(check, all[rng.Intn(lastCut)])
		}
		lastCut = len(all)
		for _, a := range check {
			b, err := s.ReadRecord(a.res.PhysOffset)
			if err != nil {
				t.Fatalf("cut %d: acknowledged record %s lost: %v (recovery %+v)", cut, a.body, err, s.Recovery())
			}
			r, err := record.Decode(b)
			if err != nil || string(r.Body) != a.body || r.QueueOffset != a.res.QueueOffset {
				t.Fatalf("cut %d: acknowledged record %s damaged: %v", cut, a.body, err)
			}
		}
		if cut%25 == 0 || cut == cuts-1 {
			verifyStore(t, s)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var crashed atomic.Bool
		var newAcks []acked
		// Flusher: group commit.
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for ctx.Err() == nil {
				c, err := s.WaitCommitted(ctx, last)
				if err != nil {
					return
				}
				if _, err := s.Flush(); err != nil {
					return
				}
				last = c
			}
		}()
		producers := 1 + rng.Intn(6)
		for p := 0; p < producers; p++ {
			wg.Add(1)
			prng := rand.New(rand.NewSource(rng.Int63()))
			go func(p int) {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					body := fmt.Sprintf("c%d-p%d-%d-%s", cut, p, i, string(make([]byte, prng.Intn(200))))
					m := msg(fmt.Sprintf("T%d", p%3), int32(i%2), body)
					r, err := s.Append(m)
					if err != nil {
						return
					}
					if err := s.WaitFlushed(ctx, r.End()); err != nil {
						return
					}
					mu.Lock()
					if !crashed.Load() {
						newAcks = append(newAcks, acked{m.Topic, m.QueueID, body, r})
					}
					mu.Unlock()
				}
			}(p)
		}
		time.Sleep(time.Duration(rng.Intn(3000)) * time.Microsecond)
		mu.Lock()
		crashed.Store(true)
		k.Kill()
		fs.CrashWith(vfs.CrashOptions{TornPages: rng.Intn(2) == 0})
		mu.Unlock()
		cancel()
		s.abandon()
		wg.Wait()
		all = append(all, newAcks...)
	}
	o.FS = fs
	s := mustOpen(t, o)
	verifyStore(t, s)
	for _, a := range all {
		b, err := s.ReadRecord(a.res.PhysOffset)
		if err != nil {
			t.Fatalf("acknowledged record %s lost: %v", a.body, err)
		}
		if r, err := record.Decode(b); err != nil || string(r.Body) != a.body {
			t.Fatalf("acknowledged record %s damaged: %v", a.body, err)
		}
	}
	total += len(all)
	if total < cuts {
		t.Fatalf("only %d acknowledged records over %d cuts: the test exercised too little", total, cuts)
	}
	t.Logf("%d cuts, %d acknowledged records, all present", cuts, total)
	s.Close()
}

// appendN appends n small records and returns their results.
func appendN(t testing.TB, s *Store, n int, prefix string) []AppendResult {
	t.Helper()
	var out []AppendResult
	for i := 0; i < n; i++ {
		r, err := s.Append(msg("T", int32(i%2), fmt.Sprintf("%s-%d", prefix, i)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestCrashRecovery crashes a store with a durable part (flushed and
// checkpointed) and a tail, perhaps damages one record, reopens it and
// checks what recovery kept: a torn or damaged tail is cut at the damage,
// damage below the checkpoint refuses to open until a repair.
func TestCrashRecovery(t *testing.T) {
	for _, tc := range []struct {
		name          string
		seed          int64
		durable, tail int
		drain         bool // dispatch the durable part before its checkpoint
		syncTail      bool // the tail reaches the disk but the checkpoint does not say so
		torn          bool // the crash keeps some unflushed pages
		damage        int  // index (durable records first, then the tail) of the record to flip a body bit of; -1: none
		corrupt       bool // the damage is below the checkpoint: Open refuses
	}{
		{name: "torn tail", seed: 7, durable: 50, tail: 50, torn: true, damage: -1},
		{name: "bit flip in unflushed tail is cut", seed: 8, durable: 20, tail: 20, syncTail: true, damage: 25},
		{name: "bit flip below checkpoint refuses to open", seed: 9, durable: 40, drain: true, damage: 30, corrupt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashFS(tc.seed)
			o := testOptions(fs, "/crash")
			s := mustOpen(t, o)
			durable := appendN(t, s, tc.durable, "d")
			if _, err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if tc.drain {
				drain(t, s)
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			recs := append(durable, appendN(t, s, tc.tail, "t")...)
			if tc.syncTail {
				for _, seg := range *s.segs.Load() {
					seg.sync()
				}
			}
			var bad AppendResult
			var path string
			if tc.damage >= 0 {
				bad = recs[tc.damage]
				path = s.segmentFor(bad.PhysOffset).path
			}
			s.abandon()
			fs.CrashWith(vfs.CrashOptions{TornPages: tc.torn})
			if tc.damage >= 0 {
				flipByte(t, fs, path, bad.PhysOffset%o.SegmentSize+89) // inside the body (it starts at 88 with IPv4 hosts): CRC mismatch
			}
			if tc.corrupt {
				checkRefusedThenRepaired(t, o, fs, path, bad, recs[len(recs)-1].End())
				return
			}
			s = mustOpen(t, o)
			defer s.Close()
			if !s.Recovery().Crashed {
				t.Fatal("crash not detected")
			}
			for _, r := range durable {
				if _, err := s.ReadRecord(r.PhysOffset); err != nil {
					t.Fatalf("durable record at %d lost: %v", r.PhysOffset, err)
				}
			}
			verifyStore(t, s)
			if tc.damage < 0 {
				if end := s.Positions().Committed; end < durable[len(durable)-1].End() {
					t.Fatalf("end %d below durable data %d", end, durable[len(durable)-1].End())
				}
				return
			}
			if got := s.Positions().Committed; got != bad.PhysOffset {
				t.Fatalf("log end %d, want the damaged record's offset %d", got, bad.PhysOffset)
			}
			// Appends continue at the cut point.
			r, err := s.Append(msg("T", 0, "again"))
			if err != nil || r.PhysOffset != bad.PhysOffset {
				t.Fatalf("append after cut: %v at %d", err, r.PhysOffset)
			}
		})
	}
}

// checkRefusedThenRepaired checks that a store whose record bad (in file
// path) is damaged below the checkpoint refuses to open with a
// *CorruptError naming it, keeps everything up to end, and opens again,
// ending at bad, after a repair (whose dry run changes nothing).
func checkRefusedThenRepaired(t *testing.T, o Options, fs vfs.FS, path string, bad AppendResult, end int64) {
	t.Helper()
	_, err := Open(o)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with corruption below the checkpoint: %v", err)
	}
	if ce.File != path || ce.Offset != bad.PhysOffset {
		t.Fatalf("error names %s@%d, want %s@%d", ce.File, ce.Offset, path, bad.PhysOffset)
	}
	// Nothing was cut: the records after the damage are still there.
	if rep, err := Inspect(o.Dir, InspectOptions{FS: fs}); err != nil || rep.End < end {
		t.Fatalf("open cut data: %v end %d", err, rep.End)
	}
	// A dry run lists the cut; the repair makes the store open again.
	plan, err := Repair(o, true)
	if err != nil || plan.CutAt != bad.PhysOffset || plan.File != path {
		t.Fatalf("dry run: %v %+v", err, plan)
	}
	if _, err := Open(o); err == nil {
		t.Fatal("dry run changed the store")
	}
	if _, err := Repair(o, false); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, o)
	defer s.Close()
	if got := s.Positions().Committed; got != bad.PhysOffset {
		t.Fatalf("after repair end %d want %d", got, bad.PhysOffset)
	}
	verifyStore(t, s)
}

// flipByte flips one bit of the durable (and volatile) contents at off of
// segment file path.
func flipByte(t testing.TB, fs vfs.FS, path string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestDiskFull(t *testing.T) {
	fs := vfs.NewCrashFS(10)
	o := testOptions(fs, "/df")
	o.Retention.CleanEvery = time.Hour
	s := mustOpen(t, o)
	defer s.Close()
	appendN(t, s, 10, "a")
	// The next segment cannot be allocated: appends fail cleanly when the
	// active one fills, and reads keep working.
	du, _ := fs.DiskUsage("/df")
	used := int64(du.Total - du.Avail)
	fs.SetCapacity(used + 48<<10) // room for queue files, not for a 64 KiB segment
	s.pre.discard()
	var err error
	for i := 0; i < 2000 && err == nil; i++ {
		_, err = s.Append(msg("T", 0, "fill-fill-fill-fill-fill-fill-fill-fill"))
	}
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append with no space: %v", err)
	}
	before := s.Positions().Committed
	if _, err := s.Append(msg("T", 0, "x")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("second append: %v", err)
	}
	if s.Positions().Committed != before {
		t.Fatal("failed append moved the log")
	}
	drain(t, s)
	verifyStore(t, s)
	// Space returns: appends resume within diskCheckEvery.
	fs.SetCapacity(0)
	time.Sleep(diskCheckEvery + 50*time.Millisecond)
	if _, err := s.Append(msg("T", 0, "resumed")); err != nil {
		t.Fatalf("append after space returned: %v", err)
	}
	// Usage above the warning ratio refuses appends up front, and they
	// resume once usage falls below the clean-forcibly ratio.
	du, _ = fs.DiskUsage("/df")
	used = int64(du.Total - du.Avail)
	fs.SetCapacity(used + used/20) // ~95% used
	// Appends see it within diskCheckEvery, without waiting for the
	// retention pass (an hour away here).
	time.Sleep(diskCheckEvery + 50*time.Millisecond)
	if _, err := s.Append(msg("T", 0, "x")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append above the warning ratio: %v", err)
	}
	if err := s.Writable(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Writable above the warning ratio: %v", err)
	}
	if g, err := s.GetMessages("T", 0, 0, 1, 1<<20, nil); err != nil || g.Status != Found {
		t.Fatalf("read while disk full: %v %v", err, g.Status)
	}
	fs.SetCapacity(0)
	time.Sleep(diskCheckEvery + 50*time.Millisecond)
	if _, err := s.Append(msg("T", 0, "y")); err != nil {
		t.Fatalf("append after usage dropped: %v", err)
	}
}

func TestFsyncErrorMakesReadOnly(t *testing.T) {
	fs := vfs.NewCrashFS(11)
	o := testOptions(fs, "/eio")
	s := mustOpen(t, o)
	appendN(t, s, 5, "a")
	fs.InjectSyncError("/eio/commitlog")
	if _, err := s.Flush(); !errors.Is(err, ErrReadOnly) || !errors.Is(err, vfs.ErrIO) {
		t.Fatalf("flush with EIO: %v", err)
	}
	if _, err := s.Append(msg("T", 0, "x")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append after EIO: %v", err)
	}
	// Reads keep working.
	g, err := s.GetMessages("T", 0, 0, 10, 1<<20, nil)
	drain(t, s)
	g, err = s.GetMessages("T", 0, 0, 10, 1<<20, nil)
	if err != nil || g.Status != Found {
		t.Fatalf("read after EIO: %v %v", err, g.Status)
	}
	fs.ClearFaults()
	s.Close()
	s = mustOpen(t, o)
	defer s.Close()
	if _, err := s.Append(msg("T", 0, "y")); err != nil {
		t.Fatalf("append after reopen: %v", err)
	}
}

// TestRecoveryCostIsBounded: after a crash, recovery re-checks only about
// VerifyWindow bytes below the checkpoint plus the unflushed tail, however
// large the store; damage further down is left alone (never cut) for
// `keel store inspect --crc` to find.
func TestRecoveryCostIsBounded(t *testing.T) {
	fs := vfs.NewCrashFS(12)
	o := testOptions(fs, "/rb")
	o.VerifyWindow = 16 << 10
	s := mustOpen(t, o)
	var all []AppendResult
	for i := 0; i < 40; i++ { // checkpoints along the way build the history
		all = append(all, appendN(t, s, 50, fmt.Sprintf("r%d", i))...)
		s.Flush()
		drain(t, s)
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	end := s.Positions().Committed
	old := all[10] // far below the window
	path := s.segmentFor(old.PhysOffset).path
	s.abandon()
	fs.CrashWith(vfs.CrashOptions{})
	flipByte(t, fs, path, old.PhysOffset%o.SegmentSize+89)
	s = mustOpen(t, o)
	defer s.Close()
	rec := s.Recovery()
	if !rec.Crashed || rec.End != end {
		t.Fatalf("recovery %+v, want crashed with end %d", rec, end)
	}
	if scanned := end - rec.ScanFrom; scanned > 2*o.VerifyWindow || scanned < o.VerifyWindow/2 {
		t.Fatalf("recovery scanned %d bytes for a %d-byte window (store %d bytes)", scanned, o.VerifyWindow, end)
	}
	if _, err := s.ReadRecord(all[len(all)-1].PhysOffset); err != nil {
		t.Fatal(err)
	}
	rep, err := Inspect(o.Dir, InspectOptions{FS: fs, CheckCRC: true})
	if err != nil || rep.FirstBad != old.PhysOffset {
		t.Fatalf("inspect --crc: first bad %d (%v), want %d", rep.FirstBad, err, old.PhysOffset)
	}
}
