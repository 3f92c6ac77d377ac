package indexhash

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/config"
)

var ctx = context.Background()

func TestKeyHash(t *testing.T) {
	for _, tc := range []struct{ topic, key string }{
		{"T", "k"}, {"TopicTest", "OrderID188"}, {"", ""}, {"t", "é"}, {"主题", "键"}, {"t", "𝄞x"},
		{"t", "a\xffb"}, {"t", strings.Repeat("z", 100)},
	} {
		want := record.JavaHashCode(tc.topic + "#" + tc.key)
		if want < 0 {
			want = -want
			if want < 0 {
				want = 0
			}
		}
		if got := keyHash(tc.topic, tc.key); got != want {
			t.Errorf("keyHash(%q, %q) = %d, want %d", tc.topic, tc.key, got, want)
		}
	}
	if absHash(math.MinInt32) != 0 || absHash(-5) != 5 {
		t.Error("absHash")
	}
	// "Aa" and "BB" collide in Java; so do topic#Aa and topic#BB.
	if keyHash("T", "Aa") != keyHash("T", "BB") {
		t.Fatal("expected a Java hash collision")
	}
}

func TestFileNames(t *testing.T) {
	ms := time.Date(2024, 3, 5, 7, 8, 9, 123e6, time.UTC).UnixMilli()
	if got := fileName(ms); got != "20240305070809123" {
		t.Fatalf("fileName = %s", got)
	}
	if back, ok := parseFileName("20240305070809123"); !ok || back != ms {
		t.Fatalf("parse = %d %v", back, ok)
	}
	for _, bad := range []string{"checkpoint", "2024030507080912", "2024030507080912x", "20241305070809123"} {
		if _, ok := parseFileName(bad); ok {
			t.Errorf("parseFileName(%q) accepted", bad)
		}
	}
}

// TestInsertQuery checks chains, newest-first order, Max, time ranges,
// per-second granularity and collisions on one slot.
func TestInsertQuery(t *testing.T) {
	for _, slots := range []int{1, 3, 1000} {
		t.Run("slots="+itoa(slots), func(t *testing.T) {
			x := openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(slots, 1000))
			defer x.Stop(ctx)
			l := newTestLog()
			var a, b []int64
			for i := range 20 {
				r := l.add(t, "T", "a b", "", 0, 1000)
				mustIndex(t, x, r)
				a = append(a, r.PhysOffset)
				if i%2 == 0 {
					r = l.add(t, "T", "b", "u"+itoa(i), 0, 1000)
					mustIndex(t, x, r)
					b = append(b, r.PhysOffset)
				}
				mustIndex(t, x, l.add(t, "U", "a", "", 0, 0)) // same key, other topic
			}
			slices.Reverse(a)
			got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "a", Max: 64})
			if !slices.Equal(got, a) {
				t.Fatalf("T#a = %v, want %v", got, a)
			}
			if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "a", Max: 5}); !slices.Equal(got, a[:5]) {
				t.Fatalf("Max 5 = %v", got)
			}
			if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "u4", Max: 64}); !slices.Equal(got, []int64{b[2]}) {
				t.Fatalf("T#u4 = %v, want %v", got, b[2])
			}
			if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "zz", Max: 64}); len(got) != 0 && slots > 3 {
				t.Fatalf("missing key = %v", got)
			}
			if got := mustQuery(t, x, sdk.Query{Topic: "", Key: "a", Max: 64}); got != nil {
				t.Fatal("empty topic matched")
			}
			// Time range: records of T#a are at ts0+1000*k (k counting all T
			// records); pick the middle ones.
			var want []int64
			var begin, end int64
			for i, r := range l.recs {
				if r.Topic == "T" && strings.Contains(r.Keys, "a") && i > 10 && i < 30 {
					if begin == 0 {
						begin = r.StoreTimestamp
					}
					end = r.StoreTimestamp
					want = append([]int64{r.PhysOffset}, want...)
				}
			}
			got = mustQuery(t, x, sdk.Query{Topic: "T", Key: "a", Begin: begin, End: end, Max: 64})
			if !slices.Equal(got, want) {
				t.Fatalf("range [%d,%d] = %v, want %v", begin, end, got, want)
			}
			if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "a", Begin: end, End: begin, Max: 64}); got != nil {
				t.Fatal("inverted range matched")
			}
		})
	}
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	if neg {
		b = append([]byte{'-'}, b...)
	}
	return string(b)
}

// TestTimeGranularity: an entry's time is its file's begin timestamp plus
// whole seconds, as RocketMQ stores it; a query returns every entry whose
// second meets the range (never missing one); the host's reading of the
// records does not narrow it further.
func TestTimeGranularity(t *testing.T) {
	x := openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(10, 100))
	defer x.Stop(ctx)
	l := newTestLog()
	r0 := l.add(t, "T", "k", "", 0, 0)    // begin of the file
	r1 := l.add(t, "T", "k", "", 0, 1500) // stored as begin + 1 s
	mustIndex(t, x, r0, r1)
	b := r0.StoreTimestamp
	for _, tc := range []struct {
		begin, end int64
		raw        []int64
	}{
		{b + 1000, b + 1000, []int64{r1.PhysOffset}},
		{r1.StoreTimestamp, 0, []int64{r1.PhysOffset}}, // RocketMQ would miss it
		{b + 1501, 0, []int64{r1.PhysOffset}},
		{b + 2000, 0, nil},
		{0, b + 999, []int64{r0.PhysOffset}},
		{b + 999, b + 1000, []int64{r1.PhysOffset, r0.PhysOffset}},
	} {
		q := sdk.Query{Topic: "T", Key: "k", Begin: tc.begin, End: tc.end, Max: 64}
		if got := mustQuery(t, x, q); !slices.Equal(got, tc.raw) {
			t.Errorf("[%d,%d]: %v, want %v", tc.begin-b, tc.end-b, got, tc.raw)
		}
	}
}

func TestMaxQueryCap(t *testing.T) {
	c := tinyConfig(10, 1000)
	c.MaxQuery = 7
	x := openIdx(t, vfs.NewCrashFS(1), "/i", c)
	defer x.Stop(ctx)
	l := newTestLog()
	for range 20 {
		mustIndex(t, x, l.add(t, "T", "k", "", 0, 10))
	}
	for max, want := range map[int]int{-1: 0, 0: 0, 1: 1, 7: 7, 8: 7, 1000: 7} {
		if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "k", Max: max}); len(got) != want {
			t.Fatalf("Max %d gave %d, want %d", max, len(got), want)
		}
	}
}

func TestRollbackSkipped(t *testing.T) {
	x := openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(10, 100))
	defer x.Stop(ctx)
	l := newTestLog()
	mustIndex(t, x,
		l.add(t, "T", "k", "", record.SysFlagTransactionRollback, 0),
		l.add(t, "T", "k", "", record.SysFlagTransactionPrepared, 0),
		l.add(t, "T", "k", "", record.SysFlagTransactionCommit, 0))
	got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "k", Max: 64})
	if !slices.Equal(got, []int64{l.recs[2].PhysOffset, l.recs[1].PhysOffset}) {
		t.Fatalf("got %v", got)
	}
}

func TestRollover(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	fixed := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	x, err := Open("/i", tinyConfig(5, 4), WithFS(fs), WithLogger(quiet), WithClock(func() time.Time { return fixed }))
	if err != nil {
		t.Fatal(err)
	}
	l := newTestLog()
	var want []int64
	for range 10 {
		r := l.add(t, "T", "k", "", 0, 100)
		mustIndex(t, x, r)
		want = append([]int64{r.PhysOffset}, want...)
	}
	files := x.Files()
	if len(files) != 4 { // 3 entries per file
		t.Fatalf("%d files: %+v", len(files), files)
	}
	for i, f := range files {
		if wantName := fileName(fixed.UnixMilli() + int64(i)); f.Name != wantName {
			t.Errorf("file %d named %s, want %s (unique within one ms)", i, f.Name, wantName)
		}
		if f.Capacity != 3 {
			t.Errorf("capacity %d", f.Capacity)
		}
	}
	if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "k", Max: 64}); !slices.Equal(got, want) {
		t.Fatalf("across files: %v, want %v", got, want)
	}
	if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "k", Max: 4}); !slices.Equal(got, want[:4]) {
		t.Fatalf("Max across files: %v", got)
	}
	// The on-disk file is RocketMQ's layout.
	b, err := fs.DurableContents("/i/" + files[0].Name)
	if err == nil && len(b) > 0 {
		t.Fatalf("unsynced file is durable")
	}
	if err := x.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	b, err = fs.DurableContents("/i/" + files[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 40+4*5+20*4 {
		t.Fatalf("file size %d", len(b))
	}
	h := decodeHeader(b)
	if h.count != 4 || h.beginPhy != l.recs[0].PhysOffset || h.endPhy != l.recs[2].PhysOffset || h.beginTs != l.recs[0].StoreTimestamp || h.endTs != l.recs[2].StoreTimestamp || h.usedSlots != 1 {
		t.Fatalf("header %+v", h)
	}
	x.Stop(ctx)
}

// TestReopen: a clean stop and reopen keep every answer without recovery.
func TestReopen(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	c := tinyConfig(7, 10)
	x := openIdx(t, fs, "/i", c)
	l := newTestLog()
	rng := rand.New(rand.NewSource(1))
	for range 100 {
		mustIndex(t, x, l.add(t, "T"+itoa(rng.Intn(2)), "k"+itoa(rng.Intn(10)), "u"+itoa(rng.Intn(50)), 0, int64(rng.Intn(3000))))
	}
	if err := x.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Query(ctx, sdk.Query{Topic: "T0", Key: "k1", Max: 64}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("query after stop: %v", err)
	}
	if err := x.Index(ctx, []sdk.Record{l.add(t, "T", "k", "", 0, 0)}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("index after stop: %v", err)
	}
	l.cut(100)
	fs.CrashWith(vfs.CrashOptions{}) // only durable state survives
	y := openIdx(t, fs, "/i", c)
	defer y.Stop(ctx)
	if y.Stats().Recoveries != 0 {
		t.Fatal("clean reopen recovered")
	}
	if in, d := y.Offsets(); in != l.next || d != l.next {
		t.Fatalf("offsets %d %d, want %d", in, d, l.next)
	}
	sameIndex(t, y, rebuild(t, c, l.recs), queriesFor(l.recs, rng))
	// And it keeps indexing.
	r := l.add(t, "T0", "k1", "", 0, 10)
	mustIndex(t, y, r)
	if got := mustQuery(t, y, sdk.Query{Topic: "T0", Key: "k1", Max: 1}); !slices.Equal(got, []int64{r.PhysOffset}) {
		t.Fatalf("got %v", got)
	}
}

// TestReindexIdempotent: records given again (a re-dispatch) leave the
// index as one built once over the log, whatever point re-dispatch starts
// at, including in the middle of an earlier file.
func TestReindexIdempotent(t *testing.T) {
	c := tinyConfig(5, 8)
	rng := rand.New(rand.NewSource(2))
	l := newTestLog()
	for range 60 {
		l.add(t, "T", "k"+itoa(rng.Intn(6))+" k"+itoa(rng.Intn(6)), "", 0, int64(rng.Intn(1500)))
	}
	want := rebuild(t, c, l.recs)
	qs := queriesFor(l.recs, rng)
	for _, from := range []int{0, 1, 17, 30, 59, 60} {
		x := openIdx(t, vfs.NewCrashFS(1), "/i", c)
		mustIndex(t, x, l.recs...)
		mustIndex(t, x, l.recs[from:]...)
		// Twice, in small batches.
		for i := from; i < len(l.recs); i += 7 {
			mustIndex(t, x, l.recs[i:min(i+7, len(l.recs))]...)
		}
		sameIndex(t, x, want, qs)
		x.Stop(ctx)
	}
}

// TestDivergentLog: after the log is cut and written again with other
// records, re-dispatch at the lower offsets replaces the old entries.
func TestDivergentLog(t *testing.T) {
	c := tinyConfig(5, 6)
	rng := rand.New(rand.NewSource(3))
	l := newTestLog()
	x := openIdx(t, vfs.NewCrashFS(1), "/i", c)
	defer x.Stop(ctx)
	for range 40 {
		mustIndex(t, x, l.add(t, "T", "old"+itoa(rng.Intn(5)), "", 0, 700))
	}
	if err := x.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	old := slices.Clone(l.recs)
	l.cut(13)
	for range 30 {
		l.add(t, "T", "new"+itoa(rng.Intn(5)), "", 0, 300)
	}
	mustIndex(t, x, l.recs[13:]...)
	qs := queriesFor(append(old, l.recs...), rng)
	sameIndex(t, x, rebuild(t, c, l.recs), qs)
	if x.Stats().Truncations != 1 {
		t.Fatalf("truncations %d", x.Stats().Truncations)
	}
}

// TestCrashRecovery: after a power cut the index reopens as it was at its
// last Sync (or at a cut back's lowered checkpoint), whatever pages of
// later writes reached the disk, and re-dispatch brings it up to date.
func TestCrashRecovery(t *testing.T) {
	c := tinyConfig(5, 9)
	for seed := int64(0); seed < 60; seed++ {
		rng := rand.New(rand.NewSource(seed))
		fs := vfs.NewCrashFS(seed)
		l := newTestLog()
		for range 80 {
			l.add(t, "T"+itoa(rng.Intn(2)), "k"+itoa(rng.Intn(8))+" k"+itoa(rng.Intn(8)), "u"+itoa(rng.Intn(40)), 0, int64(rng.Intn(1200)))
		}
		x := openIdx(t, fs, "/i", c)
		synced := 0 // records durably indexed
		pos := 0
		for pos < len(l.recs) {
			n := 1 + rng.Intn(12)
			if rng.Intn(8) == 0 && pos > 0 { // a re-dispatch from lower down
				back := rng.Intn(pos + 1)
				if back < synced {
					synced = back // the checkpoint is lowered
				}
				pos = back
			}
			end := min(pos+n, len(l.recs))
			mustIndex(t, x, l.recs[pos:end]...)
			pos = end
			if rng.Intn(4) == 0 {
				if err := x.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				synced = pos
			}
		}
		fs.CrashWith(vfs.CrashOptions{TornPages: rng.Intn(3) > 0})
		x.Stop(ctx)
		y := openIdx(t, fs, "/i", c)
		in, _ := y.Offsets()
		wantEnd := int64(0)
		if synced > 0 {
			wantEnd = l.recs[synced-1].PhysOffset + int64(l.recs[synced-1].Size)
		}
		if in != wantEnd {
			t.Fatalf("seed %d: recovered indexed end %d, want %d (synced %d records)", seed, in, wantEnd, synced)
		}
		qs := queriesFor(l.recs, rng)
		sameIndex(t, y, rebuild(t, c, l.recs[:synced]), qs)
		// Re-dispatch from any point at or below the durable one.
		from := rng.Intn(synced + 1)
		for i := from; i < len(l.recs); i += 10 {
			mustIndex(t, y, l.recs[i:min(i+10, len(l.recs))]...)
		}
		sameIndex(t, y, rebuild(t, c, l.recs), qs)
		y.Stop(ctx)
	}
}

// TestCrashDuringCutBack: a cut back lowers the checkpoint before it
// changes files, so a crash right after it recovers the cut state.
func TestCrashDuringCutBack(t *testing.T) {
	c := tinyConfig(3, 5)
	fs := vfs.NewCrashFS(9)
	l := newTestLog()
	for i := range 30 {
		l.add(t, "T", "k"+itoa(i%4), "", 0, 400)
	}
	x := openIdx(t, fs, "/i", c)
	mustIndex(t, x, l.recs...)
	if err := x.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	mustIndex(t, x, l.recs[9:12]...) // cut back to record 9, re-index 3
	fs.CrashWith(vfs.CrashOptions{TornPages: true})
	x.Stop(ctx)
	y := openIdx(t, fs, "/i", c)
	defer y.Stop(ctx)
	rng := rand.New(rand.NewSource(1))
	sameIndex(t, y, rebuild(t, c, l.recs[:9]), queriesFor(l.recs, rng))
}

func TestHashSlotsFixed(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	x := openIdx(t, fs, "/i", tinyConfig(5, 10))
	l := newTestLog()
	mustIndex(t, x, l.add(t, "T", "k", "", 0, 0))
	x.Stop(ctx)
	if _, err := Open("/i", tinyConfig(6, 10), WithFS(fs), WithLogger(quiet)); !errors.Is(err, sdk.ErrInvalidConfig) {
		t.Fatalf("reopen with other slots: %v", err)
	}
	// Another entries_per_file is fine: old files keep their size.
	y := openIdx(t, fs, "/i", tinyConfig(5, 3))
	defer y.Stop(ctx)
	for range 10 {
		mustIndex(t, y, l.add(t, "T", "k", "", 0, 0))
	}
	if got := mustQuery(t, y, sdk.Query{Topic: "T", Key: "k", Max: 64}); len(got) != 11 {
		t.Fatalf("got %v", got)
	}
	if f := y.Files(); f[0].Capacity != 9 || f[1].Capacity != 2 {
		t.Fatalf("files %+v", f)
	}
}

// TestDamagedDirectory: an unusable directory is discarded (dispatch must
// not stop), not trusted.
func TestDamagedDirectory(t *testing.T) {
	c := tinyConfig(5, 10)
	l := newTestLog()
	for range 12 {
		l.add(t, "T", "k", "", 0, 0)
	}
	for _, damage := range []string{"checkpoint garbage", "no checkpoint", "last file missing"} {
		t.Run(damage, func(t *testing.T) {
			fs := vfs.NewCrashFS(1)
			x := openIdx(t, fs, "/i", c)
			mustIndex(t, x, l.recs...)
			files := x.Files()
			x.Stop(ctx)
			switch damage {
			case "checkpoint garbage":
				f, _ := fs.Create("/i/checkpoint")
				f.WriteAt([]byte(strings.Repeat("x", 256)), 0)
				f.Close()
			case "no checkpoint":
				fs.Remove("/i/checkpoint")
			case "last file missing":
				fs.Remove("/i/" + files[len(files)-1].Name)
			}
			y := openIdx(t, fs, "/i", c)
			defer y.Stop(ctx)
			if s := y.Stats(); s.Resets != 1 || len(s.Files) != 0 || s.IndexedOffset != 0 {
				t.Fatalf("stats %+v", s)
			}
			names, _ := fs.ReadDir("/i")
			if !slices.Equal(names, []string{"checkpoint"}) {
				t.Fatalf("left %v", names)
			}
			mustIndex(t, y, l.recs...)
			if got := mustQuery(t, y, sdk.Query{Topic: "T", Key: "k", Max: 64}); len(got) != 12 {
				t.Fatalf("got %d", len(got))
			}
		})
	}
}

func TestRetention(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	c := tinyConfig(5, 4)
	x := openIdx(t, fs, "/i", c)
	l := newTestLog()
	for range 12 {
		mustIndex(t, x, l.add(t, "T", "k", "", 0, 10))
	}
	if len(x.Files()) != 4 {
		t.Fatal(x.Files())
	}
	files := x.Files()
	if err := x.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := x.Clean(files[0].EndPhyOffset); n != 0 || err != nil {
		t.Fatalf("clean at the first file's end: %d %v", n, err)
	}
	if n, err := x.Clean(files[1].EndPhyOffset + 1); n != 2 || err != nil {
		t.Fatalf("clean: %d %v", n, err)
	}
	if n, _ := x.Clean(math.MaxInt64); n != 1 {
		t.Fatalf("the last file must stay: deleted %d", n)
	}
	if got := x.Files(); len(got) != 1 || got[0].Name != files[3].Name {
		t.Fatalf("files %+v", got)
	}
	for _, f := range files[:3] {
		if _, err := fs.Stat(filepath.Join("/i", f.Name)); err == nil {
			t.Fatalf("%s still there", f.Name)
		}
	}
	if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "k", Max: 64}); len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	// Deleted files stay deleted across a crash once synced, and the
	// index reopens.
	if err := x.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	fs.CrashWith(vfs.CrashOptions{})
	x.Stop(ctx)
	y := openIdx(t, fs, "/i", c)
	defer y.Stop(ctx)
	if got := y.Files(); len(got) != 1 {
		t.Fatalf("files after reopen %+v", got)
	}
}

// TestRetentionKeepsCheckpointFile: a file the durable checkpoint names
// is not deleted before a Sync moves the checkpoint past it, so a crash
// in between does not lose the checkpoint's file.
func TestRetentionKeepsCheckpointFile(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	c := tinyConfig(5, 4)
	x := openIdx(t, fs, "/i", c)
	l := newTestLog()
	for range 4 {
		mustIndex(t, x, l.add(t, "T", "k", "", 0, 10))
	}
	if err := x.Sync(ctx); err != nil { // names file B: A holds 3 keys, B 1
		t.Fatal(err)
	}
	for range 5 {
		mustIndex(t, x, l.add(t, "T", "k", "", 0, 10)) // B fills, C holds 3
	}
	if n, _ := x.Clean(math.MaxInt64); n != 1 || x.Files()[0].BeginPhyOffset != l.recs[3].PhysOffset {
		t.Fatalf("deleted %d files before a Sync (only A may go): %+v", n, x.Files())
	}
	fs.CrashWith(vfs.CrashOptions{TornPages: true})
	x.Stop(ctx)
	y := openIdx(t, fs, "/i", c)
	if s := y.Stats(); s.Resets != 0 || s.IndexedOffset != l.recs[3].PhysOffset+int64(l.recs[3].Size) {
		t.Fatalf("after the crash: %+v", s)
	}
	mustIndex(t, y, l.recs[4:]...)
	if err := y.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := y.Clean(math.MaxInt64); n != 2 { // A (its removal was not synced) and B
		t.Fatalf("deleted %d after a Sync, want 2", n)
	}
	y.Stop(ctx)
}

// TestRetentionLoop: Start runs the check against Host.Positions().Min.
func TestRetentionLoop(t *testing.T) {
	c := tinyConfig(5, 4)
	c.CleanInterval = config.Duration(time.Millisecond)
	x := openIdx(t, vfs.NewCrashFS(1), "/i", c)
	l := newTestLog()
	for range 12 {
		mustIndex(t, x, l.add(t, "T", "k", "", 0, 10))
	}
	h := &fakeHost{log: l}
	if err := x.Start(ctx, h); err != nil {
		t.Fatal(err)
	}
	h.setMin(l.recs[7].PhysOffset) // files 0 and 1 end below
	deadline := time.Now().Add(5 * time.Second)
	for len(x.Files()) != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := len(x.Files()); n != 2 {
		t.Fatalf("%d files left", n)
	}
	if err := x.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStartCutsBeyondLog: entries for records the log no longer has are
// cut when the index starts, even if nothing is re-dispatched.
func TestStartCutsBeyondLog(t *testing.T) {
	c := tinyConfig(5, 6)
	fs := vfs.NewCrashFS(1)
	x := openIdx(t, fs, "/i", c)
	l := newTestLog()
	for i := range 20 {
		mustIndex(t, x, l.add(t, "T", "k"+itoa(i%3), "", 0, 10))
	}
	x.Sync(ctx)
	fs.CrashWith(vfs.CrashOptions{})
	x.Stop(ctx)
	l.cut(8) // the commitlog lost its unflushed tail
	y := openIdx(t, fs, "/i", c)
	defer y.Stop(ctx)
	if err := y.Start(ctx, &fakeHost{log: l}); err != nil {
		t.Fatal(err)
	}
	sameIndex(t, y, rebuild(t, c, l.recs), queriesFor(l.recs, rand.New(rand.NewSource(1))))
}

func TestLifecycleErrors(t *testing.T) {
	x := NewIndex(WithFS(vfs.NewCrashFS(1)), WithLogger(quiet))
	if err := x.Index(ctx, []sdk.Record{{Topic: "T", Keys: "k"}}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("index before configure: %v", err)
	}
	if err := x.Start(ctx, nil); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("start before configure: %v", err)
	}
	if err := x.Configure(ctx, sdk.Config{Section: "index", Document: []byte("[index.config]\nbad = 1\n")}); !errors.Is(err, sdk.ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	if err := x.Configure(ctx, sdk.Config{Section: "index"}); !errors.Is(err, sdk.ErrInvalidConfig) {
		t.Fatalf("no data dir: %v", err)
	}
	cfg := sdk.Config{Section: "index", DataDir: "/d", Document: []byte("[index.config]\nhash_slots = 11\nentries_per_file = 20\n")}
	if err := x.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if x.Config().HashSlots != 11 {
		t.Fatal(x.Config())
	}
	if err := x.Configure(ctx, cfg); !errors.Is(err, sdk.ErrInvalidConfig) {
		t.Fatalf("second configure: %v", err)
	}
	if err := x.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := x.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := x.Sync(ctx); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("sync after stop: %v", err)
	}
	// Stop without Configure is fine.
	if err := NewIndex().Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentQueries runs queries, syncs and cleans against indexing
// (for the race detector) and checks every answer is a valid prefix.
func TestConcurrentQueries(t *testing.T) {
	x := openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(7, 50))
	defer x.Stop(ctx)
	l := newTestLog()
	for range 400 {
		l.add(t, "T", "k"+itoa(len(l.recs)%5), "", 0, 5)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var indexErr, syncErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := 0; i < len(l.recs); i += 10 {
			if indexErr = x.Index(ctx, l.recs[i:i+10]); indexErr != nil {
				return
			}
			if i%50 == 0 {
				x.Index(ctx, l.recs[i:i+5]) // re-dispatch: cut back
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if syncErr = x.Sync(ctx); syncErr != nil {
				return
			}
			x.Clean(0)
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "k1", Max: 64})
		if !slices.IsSortedFunc(got, func(a, b int64) int { return int(b - a) }) {
			t.Fatalf("not newest first: %v", got)
		}
	}
	wg.Wait()
	if indexErr != nil || syncErr != nil {
		t.Fatal(indexErr, syncErr)
	}
	if got := mustQuery(t, x, sdk.Query{Topic: "T", Key: "k0", Max: 64}); len(got) != 64 {
		t.Fatalf("got %d", len(got))
	}
}
