package cq

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// precomputed stream for concurrency tests (ent is O(i)).
func precompute(n int64) []Entry {
	out := make([]Entry, n)
	off := int64(1000)
	for i := range out {
		out[i] = Entry{Offset: off, Size: int32(100 + i%7), TagsCode: int64(i) * 31}
		off += int64(out[i].Size)
	}
	return out
}

// TestConcurrentReaders runs one writer, several readers and a flusher on
// the same queue. Readers check every entry they see against the stream, so
// a half-written entry or a read past the published position fails. In the
// middle, dispatch pauses and the test truncates and applies retention while
// the readers keep going.
func TestConcurrentReaders(t *testing.T) {
	for _, fsName := range []string{"os", "crashfs"} {
		t.Run(fsName, func(t *testing.T) {
			var fsys vfs.FS = vfs.OS
			root := t.TempDir()
			if fsName == "crashfs" {
				fsys, root = vfs.NewCrashFS(9), "/cq"
			}
			opts := testOpts(fsys)
			opts.EntriesPerFile = 64
			const total = 20000
			stream := precompute(total)
			q, err := OpenQueue(opts, root, "T", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()

			var stop atomic.Bool
			var failed atomic.Value
			fail := func(format string, args ...any) {
				failed.CompareAndSwap(nil, fmt.Sprintf(format, args...))
				stop.Store(true)
			}
			var readers sync.WaitGroup
			for r := 0; r < 4; r++ {
				readers.Add(1)
				go func(seed uint64) {
					defer readers.Done()
					rng := rand.New(rand.NewPCG(seed, 0))
					var buf []Entry
					for !stop.Load() {
						mn, mx := q.Min(), q.Max()
						if mn > mx {
							fail("Min %d > Max %d", mn, mx)
							return
						}
						if mx == mn {
							continue
						}
						off := mn + rng.Int64N(mx-mn)
						if rng.IntN(2) == 0 {
							e, err := q.At(off)
							if err != nil {
								// Retention or truncation may have moved the range.
								if !errors.Is(err, ErrOffsetTooSmall) && !errors.Is(err, ErrOffsetOverflow) {
									fail("At(%d): %v", off, err)
								}
								continue
							}
							if e != stream[off] {
								fail("At(%d) = %+v, want %+v", off, e, stream[off])
							}
							continue
						}
						var gerr error
						buf, gerr = q.Get(off, 1+rng.IntN(200), buf[:0])
						if gerr != nil {
							if !errors.Is(gerr, ErrOffsetTooSmall) && !errors.Is(gerr, ErrOffsetOverflow) {
								fail("Get(%d): %v", off, gerr)
							}
							continue
						}
						for i, e := range buf {
							if e != stream[off+int64(i)] {
								fail("Get(%d)[%d] = %+v, want %+v", off, i, e, stream[off+int64(i)])
								break
							}
						}
					}
				}(uint64(r))
			}
			var flusher sync.WaitGroup
			flusher.Add(1)
			go func() {
				defer flusher.Done()
				for !stop.Load() {
					if err := q.Flush(); err != nil {
						fail("Flush: %v", err)
					}
				}
			}()

			// The single writer.
			put := func(from, to int64) {
				for i := from; i < to && !stop.Load(); i++ {
					if err := q.Put(i, stream[i]); err != nil {
						fail("Put(%d): %v", i, err)
					}
				}
			}
			put(0, total/2)
			// Dispatch paused: retention and a replication truncation.
			if _, err := q.SetMinPhysOffset(stream[1000].Offset); err != nil {
				t.Fatal(err)
			}
			if err := q.TruncatePhys(stream[total/2-300].Offset); err != nil {
				t.Fatal(err)
			}
			put(total/2-300, total)
			stop.Store(true)
			readers.Wait()
			flusher.Wait()
			if v := failed.Load(); v != nil {
				t.Fatal(v)
			}
			if q.Max() != total || q.Min() != 1000 {
				t.Fatalf("final Min/Max %d/%d", q.Min(), q.Max())
			}
		})
	}
}

// TestSetConcurrentGetOrCreate races GetOrCreate for the same queues.
func TestSetConcurrentGetOrCreate(t *testing.T) {
	s, err := OpenSet(testOpts(vfs.NewCrashFS(4)), "/cq")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	got := make([][]*Queue, 8)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := int32(0); id < 16; id++ {
				q, err := s.GetOrCreate("T", id)
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], q)
				_ = s.MaxPhysOffset()
			}
		}()
	}
	wg.Wait()
	for g := range got {
		for id := range got[g] {
			if got[g][id] != got[0][id] {
				t.Fatalf("goroutines got different queues for id %d", id)
			}
		}
	}
	if s.Len() != 16 {
		t.Fatalf("Len %d", s.Len())
	}
}

func BenchmarkPut(b *testing.B) {
	q, err := OpenQueue(Options{FS: vfs.OS, Logger: testOpts(nil).Logger}, b.TempDir(), "T", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	b.ReportAllocs()
	b.ResetTimer()
	off := int64(0)
	for i := 0; i < b.N; i++ {
		if err := q.Put(int64(i), Entry{Offset: off, Size: 200, TagsCode: int64(i)}); err != nil {
			b.Fatal(err)
		}
		off += 200
	}
}

// BenchmarkPutManyQueues is the dispatcher's pattern: one goroutine
// spreading entries over many queues of a Set.
func BenchmarkPutManyQueues(b *testing.B) {
	s, err := OpenSet(Options{FS: vfs.OS, Logger: testOpts(nil).Logger}, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const nq = 64
	next := make([]int64, nq)
	off := int64(0)
	// Create the queues and their first files outside the timing; file
	// rollovers (one per 300000 entries per queue) stay inside it.
	for id := int32(0); id < nq; id++ {
		q, err := s.GetOrCreate("BenchTopic", id)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Put(0, Entry{Offset: off, Size: 200}); err != nil {
			b.Fatal(err)
		}
		next[id] = 1
		off += 200
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := int32(i % nq)
		q, err := s.GetOrCreate("BenchTopic", id)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Put(next[id], Entry{Offset: off, Size: 200}); err != nil {
			b.Fatal(err)
		}
		next[id]++
		off += 200
	}
}

func BenchmarkGet32(b *testing.B) {
	q, err := OpenQueue(Options{FS: vfs.OS, Logger: testOpts(nil).Logger}, b.TempDir(), "T", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	const n = 100000
	for i := int64(0); i < n; i++ {
		if err := q.Put(i, Entry{Offset: i * 200, Size: 200}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]Entry, 0, 32)
		i := int64(0)
		for pb.Next() {
			var err error
			buf, err = q.Get(i%(n-32), 32, buf[:0])
			if err != nil || len(buf) != 32 {
				b.Fatal(err)
			}
			i += 32
		}
	})
}
