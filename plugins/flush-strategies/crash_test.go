package flushstrategies

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

var (
	testAddr  = netip.MustParseAddrPort("127.0.0.1:10911")
	quietLogs = slog.New(slog.NewTextHandler(io.Discard, nil))
)

func testMessage(topic string, qid int32, body []byte) *record.Message {
	return &record.Message{
		Topic: topic, QueueID: qid, Body: body,
		Properties: record.EncodeProperties(map[string]string{"TAGS": "t"}),
		BornHost:   testAddr, StoreHost: testAddr, BornTimestamp: 1,
	}
}

// crashConfig is a strategy under power-cut test.
type crashConfig struct {
	name string
	body string // [flush.config]
	// waitAck: producers wait for WaitFlushed (the host's sync ack).
	waitAck bool
}

// powerCutStats sums what a run of cuts exercised.
type powerCutStats struct {
	cuts, acked, written, lostBeyondFlush, keptBeyondFlush, tornCuts int
}

// runPowerCuts opens a store on a CrashFS, runs the strategy with
// concurrent producers, cuts power at a random moment, recovers, and
// checks after every cut:
//
//   - the recovered log reaches at least the flushed offset the store had
//     reported before the cut (loss never exceeds what was written after
//     the last completed flush);
//   - every record in the recovered log is whole, CRC-valid, contiguous
//     and exactly the record written at that offset (no torn or foreign
//     record is visible);
//   - with waitAck, every record whose WaitFlushed returned nil before the
//     cut is present, byte for byte.
//
// The filesystem is replaced every cutsPerFS cuts to keep each crash
// cheap (a crash costs time proportional to the bytes stored).
func runPowerCuts(t *testing.T, cc crashConfig, cuts, cutsPerFS int, seed int64) powerCutStats {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	var st powerCutStats
	var fs *vfs.CrashFS
	var o core.Options
	// known: offset -> record body of every record that may be in the log.
	var known map[int64][]byte
	var acked []core.AppendResult
	pol := configured(t, cc.name, cc.body).AckPolicy()
	var s *core.Store
	// kfs is the current incarnation's view of fs: killed at the cut so
	// the abandoned store cannot write into the post-crash state (no real
	// crashed process can; closing it below would otherwise write a
	// checkpoint and queue files there).
	var kfs *vfs.Killable
	for cut := 0; cut < cuts; cut++ {
		if cut%cutsPerFS == 0 {
			if s != nil {
				s.Close()
			}
			fs = vfs.NewCrashFS(rng.Int63())
			known = map[int64][]byte{}
			acked = nil
			o = core.Options{
				Dir: "/s", Logger: quietLogs,
				SegmentSize: 32 << 10, MaxMessageSize: 4 << 10,
				CQEntriesPerFile: 64,
				CheckpointEvery:  time.Duration(1+rng.Intn(5)) * time.Millisecond,
			}
			if pol.WriteBuffer || pol.WaitFlush {
				o.WriteBuffer = 16 << 10 // small: appends wrap the ring
			}
			storehost.ApplyFlushPolicy(&o, pol)
			var err error
			kfs = vfs.NewKillable(fs)
			o.FS = kfs
			if s, err = core.Open(o); err != nil {
				t.Fatalf("cut %d: open: %v", cut, err)
			}
		}

		var cpu sync.RWMutex // held for reading by whatever stores into a mapping
		strat := configured(t, cc.name, cc.body)
		h := gatedHost{storehost.New(s, quietLogs), &cpu}
		if err := strat.Start(bg, h); err != nil {
			t.Fatalf("cut %d: start: %v", cut, err)
		}

		ctx, cancel := context.WithCancel(bg)
		var (
			mu       sync.Mutex // guards crashed, newAcks, written
			crashed  bool
			newAcks  []core.AppendResult
			written  = map[int64][]byte{}
			wg       sync.WaitGroup
			appended atomic.Int64
		)
		producers := 1 + rng.Intn(8)
		budget := 1 + rng.Intn(60) // records per producer before the cut
		for p := 0; p < producers; p++ {
			wg.Add(1)
			prng := rand.New(rand.NewSource(rng.Int63()))
			go func(p int) {
				defer wg.Done()
				for i := 0; i < budget && ctx.Err() == nil; i++ {
					body := []byte(fmt.Sprintf("c%d-p%d-%d-", cut, p, i))
					body = append(body, make([]byte, prng.Intn(300))...)
					for j := len(body) - 1; j >= 0 && body[j] == 0; j-- {
						body[j] = byte('a' + prng.Intn(26))
					}
					m := testMessage("T"+strconv.Itoa(p%3), int32(i%2), body)
					cpu.RLock()
					r, err := s.Append(m)
					if err == nil {
						mu.Lock()
						if !crashed {
							written[r.PhysOffset] = body
						}
						mu.Unlock()
					}
					cpu.RUnlock()
					if err != nil {
						return
					}
					appended.Add(1)
					if cc.waitAck {
						if err := s.WaitFlushed(ctx, r.End()); err != nil {
							return
						}
						mu.Lock()
						if !crashed {
							newAcks = append(newAcks, r)
						}
						mu.Unlock()
					} else if prng.Intn(8) == 0 {
						time.Sleep(time.Duration(prng.Intn(300)) * time.Microsecond)
					}
				}
			}(p)
		}
		time.Sleep(time.Duration(rng.Intn(2500)) * time.Microsecond)
		torn := rng.Intn(4) != 0
		cpu.Lock() // no store into a mapping runs during the cut
		mu.Lock()
		crashed = true
		before := s.Positions()
		kfs.Kill()
		fs.CrashWith(vfs.CrashOptions{TornPages: torn})
		mu.Unlock()
		cpu.Unlock()
		cancel()
		// Everything after the cut fails on detached handles; the errors
		// are expected and ignored. Stop the plugin first, then the store's
		// goroutines, then the producers.
		strat.Stop(bg)
		s.Close()
		wg.Wait()

		for off, b := range written {
			known[off] = b
		}
		acked = append(acked, newAcks...)
		st.cuts++
		st.acked += len(newAcks)
		st.written += len(written)
		if torn {
			st.tornCuts++
		}

		// Reopen and check this cut against what the store reported; the
		// next cut runs on the recovered store.
		var err error
		kfs = vfs.NewKillable(fs)
		o.FS = kfs
		s, err = core.Open(o)
		if err != nil {
			t.Fatalf("cut %d: open after crash: %v", cut, err)
		}
		end := s.Positions().Committed
		if end < before.Flushed {
			t.Fatalf("cut %d: recovered log ends at %d, below the flushed offset %d reported before the cut (committed was %d)",
				cut, end, before.Flushed, before.Committed)
		}
		for _, a := range newAcks {
			if a.End() > before.Flushed {
				t.Fatalf("cut %d: ack for [%d,%d) released before the flushed offset %d passed it", cut, a.PhysOffset, a.End(), before.Flushed)
			}
		}
		if end < before.Committed {
			st.lostBeyondFlush++
		}
		if end > before.Flushed {
			st.keptBeyondFlush++
		}
		checkRecovered(t, cut, s, known, acked, newAcks)
	}
	s.Close()
	return st
}

// checkRecovered walks the whole log of a freshly opened store: every
// record must be CRC-valid, at the offset it claims, contiguous, and the
// exact record known to have been written there; every acked record must
// be below the recovered end (and so, by the walk, present and intact);
// newAcks are also read back one by one. known is pruned to the recovered
// log.
func checkRecovered(t *testing.T, cut int, s *core.Store, known map[int64][]byte, acked, newAcks []core.AppendResult) {
	t.Helper()
	p := s.Positions()
	off := p.Min
	for off < p.Committed {
		b, err := s.ReadLog(off, 1<<20)
		if err != nil || len(b) == 0 {
			t.Fatalf("cut %d: read log at %d (committed %d): %v", cut, off, p.Committed, err)
		}
		for len(b) > 0 {
			n, info, err := record.Check(b, true)
			if err != nil {
				t.Fatalf("cut %d: torn or damaged record visible at %d after recovery: %v", cut, off, err)
			}
			if !info.Blank {
				if info.PhysOffset != off {
					t.Fatalf("cut %d: record at %d claims offset %d", cut, off, info.PhysOffset)
				}
				r, err := record.Decode(b[:n])
				if err != nil {
					t.Fatalf("cut %d: decode at %d: %v", cut, off, err)
				}
				want, ok := known[off]
				if !ok {
					t.Fatalf("cut %d: record at %d was never written by the test", cut, off)
				}
				if string(r.Body) != string(want) {
					t.Fatalf("cut %d: record at %d holds %.20q, want %.20q", cut, off, r.Body, want)
				}
			}
			b = b[n:]
			off += int64(n)
		}
	}
	for o := range known {
		if o >= p.Committed {
			delete(known, o)
		}
	}
	for _, a := range acked {
		if a.End() > p.Committed {
			t.Fatalf("cut %d: acknowledged record [%d,%d) lost: log recovered to %d", cut, a.PhysOffset, a.End(), p.Committed)
		}
	}
	for _, a := range newAcks {
		b, err := s.ReadRecord(a.PhysOffset)
		if err != nil || len(b) != int(a.Size) {
			t.Fatalf("cut %d: acknowledged record at %d unreadable: %v", cut, a.PhysOffset, err)
		}
	}
}

func crashSeed(t *testing.T) int64 {
	seed := time.Now().UnixNano()
	if v := os.Getenv("KEEL_SEED"); v != "" {
		seed, _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("seed %d (set KEEL_SEED to replay the random choices; goroutine timing still varies)", seed)
	return seed
}

// TestPowerCutSync: across 1000 random power cuts (torn pages in most), no
// record acknowledged under the sync strategy is lost, and no torn record
// is ever visible.
func TestPowerCutSync(t *testing.T) {
	cuts := 1000
	if testing.Short() {
		cuts = 100
	}
	seed := crashSeed(t)
	// Two independent filesystems in parallel halve the wall time.
	var total powerCutStats
	var mu sync.Mutex
	t.Run("group", func(t *testing.T) {
		for w := 0; w < 2; w++ {
			t.Run(strconv.Itoa(w), func(t *testing.T) {
				t.Parallel()
				st := runPowerCuts(t, crashConfig{name: NameSync, waitAck: true}, cuts/2, 50, seed+int64(w))
				mu.Lock()
				total.cuts += st.cuts
				total.acked += st.acked
				total.written += st.written
				total.tornCuts += st.tornCuts
				total.keptBeyondFlush += st.keptBeyondFlush
				mu.Unlock()
			})
		}
	})
	t.Logf("%+v", total)
	if total.cuts < cuts || total.acked < cuts {
		t.Fatalf("exercised too little: %+v", total)
	}
}

// TestPowerCutAsync: under async flushing a cut loses at most what was
// written after the last completed flush, and never exposes a torn record.
func TestPowerCutAsync(t *testing.T) {
	t.Parallel()
	st := runPowerCuts(t, crashConfig{name: NameAsync,
		body: "interval = \"1ms\"\nleast_pages = 1\nthorough_interval = \"3ms\"\n"}, 200, 50, crashSeed(t))
	t.Logf("%+v", st)
	if st.lostBeyondFlush == 0 {
		t.Fatalf("no cut lost unflushed data: the test did not exercise async loss: %+v", st)
	}
}

// TestPowerCutBuffered: as TestPowerCutAsync for the buffered strategy.
func TestPowerCutBuffered(t *testing.T) {
	t.Parallel()
	st := runPowerCuts(t, crashConfig{name: NameBuffered,
		body: "commit_interval = \"1ms\"\ninterval = \"1ms\"\nleast_pages = 1\nthorough_interval = \"3ms\"\n"}, 200, 50, crashSeed(t))
	t.Logf("%+v", st)
	if st.lostBeyondFlush == 0 {
		t.Fatalf("no cut lost unflushed data: %+v", st)
	}
}

// gatedHost holds cpu for reading during Commit, which copies the write
// buffer into mapped segments: a simulated power cut must not run
// concurrently with stores into a mapping (vfs.CrashFS's rule).
type gatedHost struct {
	*storehost.Host
	cpu *sync.RWMutex
}

var _ sdk.Host = gatedHost{}

func (g gatedHost) Commit(ctx context.Context) (int64, error) {
	g.cpu.RLock()
	defer g.cpu.RUnlock()
	return g.Host.Commit(ctx)
}

// TestBufferedOnWriteBufferStore runs the buffered strategy on a store
// with a write buffer: appends stay invisible (not committed) until a
// commit round, then become committed and, after a flush round, durable.
func TestBufferedOnWriteBufferStore(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	s, err := core.Open(core.Options{Dir: "/wb", FS: fs, Logger: quietLogs, SegmentSize: 1 << 20,
		MaxMessageSize: 4 << 10, CQEntriesPerFile: 1024, WriteBuffer: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	strat := configured(t, NameBuffered, "commit_interval = \"150ms\"\ninterval = \"5ms\"\nleast_pages = 0\n")
	if !strat.AckPolicy().WriteBuffer {
		t.Fatal("buffered does not ask for a write buffer")
	}
	if err := strat.Start(bg, storehost.New(s, quietLogs)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var end int64
	for i := 0; i < 50; i++ {
		r, err := s.Append(testMessage("WB", 0, []byte(fmt.Sprintf("wb-%d", i))))
		if err != nil {
			t.Fatal(err)
		}
		end = r.End()
	}
	p := s.Positions()
	if time.Since(start) < 100*time.Millisecond && (p.Committed >= end || p.Wrote != end) {
		t.Fatalf("before the first commit round: wrote %d committed %d, want wrote %d and nothing committed", p.Wrote, p.Committed, end)
	}
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := s.WaitFlushed(ctx, end); err != nil {
		t.Fatalf("not flushed: %v (positions %+v)", err, s.Positions())
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("flushed after %v, before the first commit round could run", d)
	}
	// Stop commits what the buffer still holds.
	r, err := s.Append(testMessage("WB", 0, []byte("last")))
	if err != nil {
		t.Fatal(err)
	}
	if err := strat.Stop(bg); err != nil {
		t.Fatal(err)
	}
	if p := s.Positions(); p.Committed != r.End() || p.Flushed != r.End() {
		t.Fatalf("after Stop: %+v, want committed and flushed %d", p, r.End())
	}
	b, _ := strat.(sdk.MetricsWriter).WriteMetrics(bg)
	if metricValue(t, b, `keel_flush_commits_total{strategy="buffered"}`) < 2 {
		t.Fatalf("commits not counted:\n%s", b)
	}
}
