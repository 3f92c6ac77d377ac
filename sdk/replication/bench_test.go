package replication

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk/storehost"
)

// benchNode opens a store with larger segments for benchmarks.
func benchNode(b *testing.B, name, dir string) *tnode {
	b.Helper()
	n := &tnode{t: b, name: name, dir: dir, dataDir: dir + "-plugin"}
	n.clock.Store(1_700_000_000_000)
	os.MkdirAll(n.dataDir, 0o755)
	s, err := core.Open(core.Options{Dir: dir, SegmentSize: 64 << 20, CQEntriesPerFile: 1 << 16, MaxMessageSize: 64 << 10,
		Logger: testLogger(b), Now: func() int64 { return n.clock.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	n.store = s
	n.host = storehost.New(s, testLogger(b))
	b.Cleanup(n.close)
	return n
}

// BenchmarkReplication64Producers measures producer throughput and ack
// latency on a master replicating to one slave over loopback, with 64
// concurrent producers of 1 KiB messages: async (acks do not wait) and
// sync (each ack waits for the slave's acknowledgement). Sync reaching
// most of async's throughput shows acknowledgements coalesce.
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
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			begin := time.Now()
			var wg sync.WaitGroup
			for g := 0; g < producers; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					mm := msg("Bench", int32(g%8), "p")
					mm.Body = body
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						r, err := m.store.Append(mm)
						if err != nil {
							failed.Add(1)
							return
						}
						if o.WaitReplicas > 0 {
							ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
							if err := m.host.WaitReplicated(ctx, r.End()); err != nil {
								failed.Add(1)
							}
							cancel()
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
			b.StopTimer()
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
			b.ReportMetric(float64(b.N)/acked.Seconds(), "acked-msgs/s")
			b.ReportMetric(float64(b.N)/replicated.Seconds(), "replicated-msgs/s")
		})
	}
}

// BenchmarkCatchUpEmptySlave measures how fast an empty slave copies a
// master's log over loopback (MB/s), next to a plain sequential write of
// the same bytes to a file on the same disk in the same run (into the page
// cache, and with the final fsync: the disk's sequential bandwidth). The
// slave, acknowledging on receipt, writes into the page cache too.
func BenchmarkCatchUpEmptySlave(b *testing.B) {
	const total = 128 << 20
	dirs := tempDirs(b, "m")
	m := benchNode(b, "m", dirs[0])
	o := Options{StartFenced: StartFencedNever, BatchSize: 1 << 20}
	m.start(RoleMaster, "", o)
	body := make([]byte, 4000)
	mm := msg("Bench", 0, "c")
	mm.Body = body
	for m.store.Positions().Committed < total {
		if _, err := m.store.Append(mm); err != nil {
			b.Fatal(err)
		}
	}
	size := m.store.Positions().Committed
	b.SetBytes(size)
	b.ResetTimer()
	var copyDur, rawDur, syncDur time.Duration
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(b.TempDir(), fmt.Sprint("s", i))
		s := benchNode(b, "s", dir)
		t0 := time.Now()
		s.start(RoleSlave, m.repl.Addr(), o)
		for s.store.Positions().Committed < size {
			time.Sleep(200 * time.Microsecond)
		}
		copyDur += time.Since(t0)
		s.close()

		// Raw sequential write of the same amount, same disk.
		f, err := os.Create(filepath.Join(filepath.Dir(dir), fmt.Sprint("raw", i)))
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		t1 := time.Now()
		for w := int64(0); w < size; w += int64(len(buf)) {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		rawDur += time.Since(t1)
		t2 := time.Now()
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		syncDur += time.Since(t2)
		f.Close()
	}
	b.StopTimer()
	mb := float64(size) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/copyDur.Seconds(), "catchup-MB/s")
	b.ReportMetric(mb/rawDur.Seconds(), "raw-write-MB/s")          // into the page cache, as the slave writes
	b.ReportMetric(mb/(rawDur+syncDur).Seconds(), "raw-disk-MB/s") // the same, fsynced: the disk's sequential bandwidth
	b.ReportMetric(100*rawDur.Seconds()/copyDur.Seconds(), "catchup-%-of-raw-write")
	b.ReportMetric(100*(rawDur+syncDur).Seconds()/copyDur.Seconds(), "catchup-%-of-raw-disk")
}
