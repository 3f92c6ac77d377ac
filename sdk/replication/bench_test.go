package replication

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk/storehost"
)

// cpuTime is the user and system CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchNode opens a store with larger segments for benchmarks.
func benchNode(b testing.TB, name, dir string) *tnode {
	b.Helper()
	n := &tnode{t: b, name: name, dir: dir, dataDir: dir + "-plugin"}
	n.clock.Store(1_700_000_000_000)
	os.MkdirAll(n.dataDir, 0o755)
	s, err := core.Open(core.Options{Dir: dir, SegmentSize: catchUpSegment, CQEntriesPerFile: 1 << 16, MaxMessageSize: 64 << 10,
		Logger: testLogger(b), Now: func() int64 { return n.clock.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	n.store = s
	n.host = storehost.New(s, testLogger(b))
	b.Cleanup(n.close)
	return n
}

// replMsgsPerOp is how many messages one iteration of
// BenchmarkReplication64Producers sends, so that -benchtime=1x measures a
// steady stream rather than a single message's latency.
const replMsgsPerOp = 100_000

// BenchmarkReplication64Producers measures producer throughput and ack
// latency on a master replicating to one slave over loopback, with 64
// concurrent producers of 1 KiB messages: async (acks do not wait) and
// sync (each ack waits for the slave's acknowledgement). One iteration is
// replMsgsPerOp messages. acked-msgs/s is the producers' rate;
// replicated-msgs/s counts until the slave holds everything (for async it
// includes the slave catching up after the producers finished), which is
// async replication's throughput. Sync reaching most of async's
// replicated throughput shows acknowledgements coalesce.
func BenchmarkReplication64Producers(b *testing.B) {
	for _, mode := range []string{"async", "sync"} {
		b.Run(mode, func(b *testing.B) {
			dirs := tempDirs(b, "m", "s")
			o := Options{HeartbeatInterval: 100 * time.Millisecond, StartFenced: StartFencedNever}
			if mode == "sync" {
				o.WaitReplicas = 1
			}
			m := benchNode(b, "m", dirs[0])
			m.start(RoleMaster, "", o)
			s := benchNode(b, "s", dirs[1])
			s.start(RoleSlave, m.repl.Addr(), o)
			eventually(b, 5*time.Second, "slave in sync", func() bool { return m.host.InSync() == 1 })
			const producers = 64
			body := make([]byte, 1024)
			var next atomic.Int64
			lat := make([][]time.Duration, producers)
			var failed atomic.Int64
			total := int64(b.N) * replMsgsPerOp
			b.SetBytes(int64(len(body)) * replMsgsPerOp)
			b.ResetTimer()
			cpu0 := cpuTime()
			begin := time.Now()
			var wg sync.WaitGroup
			for g := 0; g < producers; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					mm := msg("Bench", int32(g%8), "p")
					mm.Body = body
					done := make(chan bool, 1) // acks as the host sends them (AckAsync)
					for next.Add(1) <= total {
						t0 := time.Now()
						r, err := m.store.Append(mm)
						if err != nil {
							failed.Add(1)
							return
						}
						if o.WaitReplicas > 0 {
							m.host.OnReplicated(r.End(), 3*time.Second, func(ok bool) { done <- ok })
							if !<-done {
								failed.Add(1)
							}
						}
						lat[g] = append(lat[g], time.Since(t0))
					}
				}(g)
			}
			wg.Wait()
			acked := time.Since(begin)
			// Replication throughput includes the slave catching up.
			for s.store.Positions().Committed < m.store.Positions().Committed {
				time.Sleep(100 * time.Microsecond)
			}
			replicated := time.Since(begin)
			cpu := cpuTime() - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(total), "cpu-µs/msg")
			b.ReportMetric(cpu.Seconds()/replicated.Seconds(), "cpus-busy")
			if failed.Load() > 0 {
				b.Fatalf("%d failed acks", failed.Load())
			}
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-ack-µs")
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-ack-µs")
			}
			b.ReportMetric(float64(total)/acked.Seconds(), "acked-msgs/s")
			b.ReportMetric(float64(total)/replicated.Seconds(), "replicated-msgs/s")
		})
	}
}

// catchUpSegment is the segment size of the catch-up benchmark's stores
// (benchNode) and of its raw probe's files.
const catchUpSegment = 64 << 20

// BenchmarkCatchUpEmptySlave measures how fast an empty slave copies a
// master's 128 MiB log over loopback, next to a raw write of the same
// number of bytes on the same disk in the same run, in the slave's regime
// (rawSegmentWrite): files preallocated like its segments, bytes copied
// into a shared mapping in 1 MiB chunks, then fdatasync.
//
//   - catchup-MB/s: from the slave's start (connect, handshake) until its
//     committed offset reaches the master's: bytes in its page cache, as
//     the slave acknowledges by default. Compared with raw-write-MB/s (the
//     copies into the mappings, no fdatasync): catchup-%-of-raw-write.
//   - catchup-durable-MB/s: the same plus the slave's Flush (fdatasync of
//     what it wrote). Compared with raw-disk-MB/s (the copies and the
//     fdatasyncs: the disk's sequential bandwidth for this layout):
//     catchup-%-of-raw-disk.
//
// Record bodies are random (a host may special-case zero writes).
func BenchmarkCatchUpEmptySlave(b *testing.B) {
	const total = 128 << 20
	dirs := tempDirs(b, "m")
	m := benchNode(b, "m", dirs[0])
	o := Options{StartFenced: StartFencedNever}
	m.start(RoleMaster, "", o)
	rng := rand.New(rand.NewPCG(1, 2))
	mm := msg("Bench", 0, "c")
	mm.Body = make([]byte, 4000)
	for m.store.Positions().Committed < total {
		fillRandom(rng, mm.Body)
		if _, err := m.store.Append(mm); err != nil {
			b.Fatal(err)
		}
	}
	size := m.store.Positions().Committed
	chunk := make([]byte, 1<<20)
	fillRandom(rng, chunk)
	b.SetBytes(size)
	b.ResetTimer()
	var copyDur, flushDur time.Duration
	var rawW, rawS [rawModes]time.Duration
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(b.TempDir(), fmt.Sprint("s", i))
		s := benchNode(b, "s", dir)
		t0 := time.Now()
		s.start(RoleSlave, m.repl.Addr(), o)
		for s.store.Positions().Committed < size {
			time.Sleep(200 * time.Microsecond)
		}
		copyDur += time.Since(t0)
		t1 := time.Now()
		if _, err := s.host.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		flushDur += time.Since(t1)
		s.close()

		for mode := range rawModes {
			w, sy, err := rawSegmentWrite(filepath.Join(filepath.Dir(dir), fmt.Sprint("raw", i, "-", mode)), size, catchUpSegment, chunk, mode)
			if err != nil {
				b.Fatal(err)
			}
			rawW[mode] += w
			rawS[mode] += sy
		}
	}
	b.StopTimer()
	mb := float64(size) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/copyDur.Seconds(), "catchup-MB/s")
	b.ReportMetric(mb/(copyDur+flushDur).Seconds(), "catchup-durable-MB/s")
	b.ReportMetric(mb/rawW[rawMmap].Seconds(), "raw-write-MB/s")
	b.ReportMetric(mb/(rawW[rawMmap]+rawS[rawMmap]).Seconds(), "raw-mmap-disk-MB/s")
	b.ReportMetric(mb/(rawW[rawPwrite]+rawS[rawPwrite]).Seconds(), "raw-pwrite-disk-MB/s")
	b.ReportMetric(mb/(rawW[rawOverlap]+rawS[rawOverlap]).Seconds(), "raw-overlapped-MB/s")
	// The disk's sequential bandwidth as docs/benchmarks.md defines it
	// (1 MiB writes, then one fdatasync): the faster write method.
	best := min(rawW[rawMmap]+rawS[rawMmap], rawW[rawPwrite]+rawS[rawPwrite])
	b.ReportMetric(mb/best.Seconds(), "raw-disk-MB/s")
	b.ReportMetric(100*rawW[rawMmap].Seconds()/copyDur.Seconds(), "catchup-%-of-raw-write")
	b.ReportMetric(100*best.Seconds()/(copyDur+flushDur).Seconds(), "catchup-%-of-raw-disk")
	b.ReportMetric(100*(rawW[rawOverlap]+rawS[rawOverlap]).Seconds()/(copyDur+flushDur).Seconds(), "catchup-%-of-overlapped")
}

// Raw write methods of rawSegmentWrite.
const (
	rawMmap    = iota // copies into shared mappings, then fdatasync
	rawPwrite         // pwrite, then fdatasync
	rawOverlap        // pwrite with writeback started every 4 MiB (sync_file_range), then fdatasync: what core's AppendRaw does
	rawModes
)

// rawSegmentWrite writes size bytes of chunk, 1 MiB at a time, into new
// files under dir, each preallocated to segSize (fallocate, as core's
// segments are, before the clock starts — the store preallocates ahead
// too), by method mode, then fdatasyncs each file. It returns the time of
// the writes and the time of the fdatasyncs.
func rawSegmentWrite(dir string, size, segSize int64, chunk []byte, mode int) (write, sync time.Duration, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	type seg struct {
		f vfs.File
		m vfs.Mapping
	}
	var segs []seg
	defer func() {
		for _, s := range segs {
			s.m.Close()
			s.f.Close()
		}
	}()
	for off := int64(0); off < size; off += segSize {
		f, err := vfs.OS.Create(filepath.Join(dir, fmt.Sprintf("%020d", off)))
		if err != nil {
			return 0, 0, err
		}
		if err := f.Allocate(0, segSize); err != nil {
			f.Close()
			return 0, 0, err
		}
		mp, err := f.Map(int(segSize))
		if err != nil {
			f.Close()
			return 0, 0, err
		}
		segs = append(segs, seg{f, mp})
	}
	t0 := time.Now()
	kicked := int64(0)
	for off := int64(0); off < size; {
		s := segs[off/segSize]
		rel := off % segSize
		end := min(segSize, rel+size-off, rel+int64(len(chunk)))
		if mode == rawMmap {
			off += int64(copy(s.m.Bytes()[rel:end], chunk))
			continue
		}
		if _, err := s.f.WriteAt(chunk[:end-rel], rel); err != nil {
			return 0, 0, err
		}
		off += end - rel
		if mode == rawOverlap && (off-kicked >= 4<<20 || off%segSize == 0) {
			from := max(kicked, off-rel-(end-rel)) // not before this file's start
			if ws, ok := s.f.(vfs.WritebackStarter); ok {
				ws.StartWriteback(from%segSize, off-from)
			}
			kicked = off
		}
	}
	write = time.Since(t0)
	t1 := time.Now()
	for _, s := range segs {
		if err := s.f.Datasync(); err != nil {
			return 0, 0, err
		}
	}
	return write, time.Since(t1), nil
}

// fillRandom fills b with pseudo-random bytes.
func fillRandom(r *rand.Rand, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
}
