package core

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
)

func benchStore(b *testing.B, segSize int64) *Store {
	b.Helper()
	s, err := Open(Options{Dir: b.TempDir(), FS: vfs.OS, SegmentSize: segSize, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func body(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte('a' + i%26)
	}
	return p
}

// BenchmarkAppend128 appends 128-byte bodies from one goroutine, one
// record per call, with no durability wait (the 1.5 M records/s
// figure). Records/s = 1e9 / ns/op.
func BenchmarkAppend128(b *testing.B) {
	s := benchStore(b, 1<<30)
	m := msg("BenchTopic", 0, string(body(128)))
	b.SetBytes(128)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.QueueID = int32(i & 7)
		if _, err := s.Append(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend128Parallel is the same from GOMAXPROCS*4 goroutines.
func BenchmarkAppend128Parallel(b *testing.B) {
	s := benchStore(b, 1<<30)
	b.SetBytes(128)
	b.ReportAllocs()
	b.SetParallelism(4)
	var q atomic.Int32
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		m := msg("BenchTopic", q.Add(1)&7, string(body(128)))
		for pb.Next() {
			if _, err := s.Append(m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAppendBatch128 appends batches of 32 records of 128 bytes, with
// the recovery tail bound at its default (flushes, checkpoints and, when
// the disk or the dispatcher falls behind, write stalls behind the writer)
// and without it; run long enough (-benchtime=5s) to write several bounds'
// worth, the ratio of the two is what the bound costs a writer that
// outruns the disk.
func BenchmarkAppendBatch128(b *testing.B) {
	for _, bc := range []struct {
		name  string
		bound int64
	}{{"bounded", 0}, {"unbounded", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir(), FS: vfs.OS, SegmentSize: 1 << 30, RecoveryTail: bc.bound, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			appendBatch128(b, s)
			st := s.Stalls()
			b.ReportMetric(float64(st.Count)/float64(b.N), "stalls/op")
		})
	}
}

func appendBatch128(b *testing.B, s *Store) {
	msgs := make([]*record.Message, 32)
	for i := range msgs {
		msgs[i] = msg("BenchTopic", int32(i&7), string(body(128)))
	}
	res := make([]AppendResult, 0, 32)
	b.SetBytes(128 * 32)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.AppendBatch(msgs, res[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendRaw32 is a replica's steady-state append: frames of 32
// records of 128-byte bodies (about one DATA frame under sync replication
// at 64 producers), appended to a master store and read back with
// ReadLog ahead of the timed part (which starts once the master's
// dispatcher has caught up), then copied into a replica store with
// AppendRaw, the replica's dispatcher running alongside as it does on a
// slave. ns/op is per frame.
func BenchmarkAppendRaw32(b *testing.B) {
	src, dst := benchStore(b, 1<<30), benchStore(b, 1<<30)
	msgs := make([]*record.Message, 32)
	for i := range msgs {
		msgs[i] = msg("BenchTopic", int32(i&7), string(body(128)))
	}
	var read, off int64
	frames := make([][]byte, 0, 1024)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%cap(frames) == 0 {
			b.StopTimer()
			frames = frames[:0]
			for range min(cap(frames), b.N-i) {
				if _, err := src.AppendBatch(msgs, nil); err != nil {
					b.Fatal(err)
				}
				data, err := src.ReadLog(read, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				frames = append(frames, data)
				read += int64(len(data))
			}
			if i == 0 {
				b.SetBytes(int64(len(frames[0])))
			}
			if _, err := src.WaitDispatched(context.Background(), read-1); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		data := frames[i%cap(frames)]
		if err := dst.AppendRaw(off, data); err != nil {
			b.Fatal(err)
		}
		off += int64(len(data))
	}
}

// gate is a ConfirmSource that holds dispatch at 0 until opened.
type gate struct{ open atomic.Bool }

func (g *gate) ConfirmOffset() int64 {
	if g.open.Load() {
		return 1 << 62
	}
	return 0
}

// BenchmarkDispatch128 is the dispatcher's rate for 128-byte bodies over 8
// queues, what bounds consume-queue lag and the re-dispatch after a crash:
// 64 MiB of records are appended with dispatch held back, then released
// and timed until every record is in its consume queue. MB/s is of log
// bytes; compare with BenchmarkAppendBatch128's on the same machine (the
// dispatcher keeps up with appends when it is the faster of the two).
func BenchmarkDispatch128(b *testing.B) {
	const fill = 64 << 20
	msgs := make([]*record.Message, 32)
	for i := range msgs {
		msgs[i] = msg("BenchTopic", int32(i&7), string(body(128)))
	}
	var recs int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		g := &gate{}
		s, err := Open(Options{Dir: b.TempDir(), FS: vfs.OS, SegmentSize: 256 << 20, Confirm: g, RecoveryTail: -1, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		res := make([]AppendResult, 0, 32)
		for s.Positions().Committed < fill {
			if res, err = s.AppendBatch(msgs, res[:0]); err != nil {
				b.Fatal(err)
			}
			recs += int64(len(res))
		}
		end := s.Positions().Committed
		b.SetBytes(end)
		b.StartTimer()
		g.open.Store(true)
		s.NotifyConfirm()
		for d := s.Positions().Dispatched; d < end; d = s.Positions().Dispatched {
			if _, err := s.WaitDispatched(context.Background(), d); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		s.Close()
	}
	b.ReportMetric(float64(recs)/b.Elapsed().Seconds(), "records/s")
}
