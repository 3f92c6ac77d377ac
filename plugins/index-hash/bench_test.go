package indexhash

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk"
)

const benchTopic = "BenchTopic"

// benchRecords returns n records with a UNIQ_KEY and one KEYS key each
// (two index entries), 200-byte records, 1 ms apart.
func benchRecords(from, n int) []sdk.Record {
	recs := make([]sdk.Record, n)
	for i := range recs {
		j := from + i
		recs[i] = sdk.Record{Topic: benchTopic, PhysOffset: int64(j) * 200, Size: 200, StoreTimestamp: 1_700_000_000_000 + int64(j),
			Keys: "order-" + strconv.Itoa(j), UniqKey: "U" + strconv.Itoa(j)}
	}
	return recs
}

// BenchmarkIndex measures indexing throughput with RocketMQ's default
// geometry (5M slots, 20M entries: 420 MB files) on the OS filesystem,
// in dispatch batches of 1024 records of two keys each, Syncs included
// once a second's worth (every 64 batches).
func BenchmarkIndex(b *testing.B) {
	x, err := Open(b.TempDir(), func() Config { c := DefaultConfig(); c.CleanInterval = 0; return c }(), WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer x.Stop(context.Background())
	const batch = 1024
	recs := benchRecords(0, 64*batch)
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		// Shift the prepared records to fresh offsets.
		base := int64(i) * 200
		for k := range recs[:n] {
			recs[k].PhysOffset = base + int64(k)*200
			recs[k].StoreTimestamp = 1_700_000_000_000 + int64(i+k)
		}
		if err := x.Index(context.Background(), recs[:n]); err != nil {
			b.Fatal(err)
		}
		if (i/batch)%64 == 63 {
			if err := x.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}

// bigIndex is the large index BenchmarkQuery shares across its runs.
var bigIndex struct {
	once  sync.Once
	x     *Index
	dir   string
	keys  int
	build time.Duration
	err   error
}

// benchKeys is the number of keys BenchmarkQuery indexes: KEEL_BENCH_KEYS,
// default 10,000,000 (1,000,000 with -short). Each record contributes its
// KEYS key; the index holds twice as many entries (UNIQ_KEY too).
func benchKeys() int {
	if v, err := strconv.Atoi(os.Getenv("KEEL_BENCH_KEYS")); err == nil && v > 0 {
		return v
	}
	if testing.Short() {
		return 1_000_000
	}
	return 10_000_000
}

func loadBigIndex(b *testing.B) *Index {
	bigIndex.once.Do(func() {
		dir, err := os.MkdirTemp("", "keel-index-bench-")
		if err != nil {
			bigIndex.err = err
			return
		}
		bigIndex.dir = dir
		n := benchKeys()
		c := DefaultConfig()
		c.CleanInterval = 0
		x, err := Open(dir, c, WithLogger(quiet))
		if err != nil {
			bigIndex.err = err
			return
		}
		start := time.Now()
		for i := 0; i < n; i += 4096 {
			if err := x.Index(context.Background(), benchRecords(i, min(4096, n-i))); err != nil {
				bigIndex.err = err
				return
			}
		}
		bigIndex.build = time.Since(start)
		bigIndex.x, bigIndex.keys = x, n
	})
	if bigIndex.err != nil {
		b.Fatal(bigIndex.err)
	}
	return bigIndex.x
}

// percentiles reports p50/p99/p999 of ds as metrics.
func percentiles(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	at := func(p float64) float64 { return float64(ds[min(len(ds)-1, int(float64(len(ds))*p))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(at(0.999), "p999-ns")
}

// synthHost serves synthetic records for benchRecords' offsets, built on
// demand (a cache miss costs an encode, as a log read costs a copy).
type synthHost struct {
	sdk.Host
	n int
}

func (h *synthHost) Positions(ctx context.Context) (sdk.Positions, error) {
	end := int64(h.n) * 200
	return sdk.Positions{Committed: end, Confirm: end, Dispatched: end, Flushed: end}, nil
}

func (h *synthHost) ReadRecord(ctx context.Context, off int64) ([]byte, error) {
	j := off / 200
	if off%200 != 0 || j >= int64(h.n) {
		return nil, fmt.Errorf("no record at %d: %w", off, sdk.ErrOffset)
	}
	props := record.EncodeProperties(map[string]string{record.PropertyKeys: "order-" + strconv.FormatInt(j, 10), record.PropertyUniqKey: "U" + strconv.FormatInt(j, 10)})
	m := &record.Message{Topic: benchTopic, Body: make([]byte, 64), Properties: props, StoreHost: netip.MustParseAddrPort("127.0.0.1:10911")}
	b, err := record.Encode(nil, m, record.Limits{})
	if err != nil {
		return nil, err
	}
	record.Stamp(b, j, off, 1_700_000_000_000+j)
	return b, nil
}

// BenchmarkQuery measures key lookups on a large index (benchKeys keys,
// built once per process; the build time is logged): Query (candidate
// offsets from the mapped files, warm page cache) over random keys.
// Latency percentiles are reported as p50-ns, p99-ns and p999-ns.
func BenchmarkQuery(b *testing.B) {
	x := loadBigIndex(b)
	b.Logf("index of %d keys (%d entries, %d files) built in %v", bigIndex.keys, x.Stats().Entries, len(x.Files()), bigIndex.build.Round(time.Millisecond))
	n := bigIndex.keys
	b.Run("Query", func(b *testing.B) {
		ds := make([]time.Duration, 0, b.N)
		seed := uint64(88172645463325252)
		b.ResetTimer()
		for range b.N {
			seed ^= seed << 13
			seed ^= seed >> 7
			seed ^= seed << 17
			key := "order-" + strconv.Itoa(int(seed%uint64(n)))
			t0 := time.Now()
			offs, err := x.Query(context.Background(), sdk.Query{Topic: benchTopic, Key: key, Max: 64})
			ds = append(ds, time.Since(t0))
			if err != nil || len(offs) == 0 {
				b.Fatalf("%s: %v %v", key, offs, err)
			}
		}
		b.StopTimer()
		percentiles(b, ds)
	})
}

// TestMain's plugintest.Main removes built binaries; the big benchmark
// index is removed here.
func init() {
	benchCleanup = func() {
		if bigIndex.x != nil {
			bigIndex.x.Stop(context.Background())
		}
		if bigIndex.dir != "" {
			os.RemoveAll(bigIndex.dir)
		}
	}
}
