package indexhash

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
)

func offsetsOf(ms []Message) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, m.Offset)
	}
	return out
}

// TestQueryMessagesFilters: hash collisions (Java's "Aa"/"BB"), slot
// collisions, other topics, deleted records and exact times are filtered
// by reading the records.
func TestQueryMessagesFilters(t *testing.T) {
	x := openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(1, 100)) // one slot: everything collides
	defer x.Stop(ctx)
	l := newTestLog()
	h := &fakeHost{log: l}
	aa1 := l.add(t, "T", "Aa", "", 0, 1000)
	bb := l.add(t, "T", "BB", "", 0, 1000) // same hash as Aa
	other := l.add(t, "U", "Aa", "", 0, 1000)
	uniq := l.add(t, "T", "x y", "Aa", 0, 1000) // Aa as UNIQ_KEY
	dup := l.add(t, "T", "Aa Aa", "", 0, 1000)  // listed twice
	aa2 := l.add(t, "T", "z Aa", "", 0, 1000)
	mustIndex(t, x, l.recs...)

	raw := mustQuery(t, x, sdk.Query{Topic: "T", Key: "Aa", Max: 64})
	if !slices.Contains(raw, bb.PhysOffset) {
		t.Fatalf("the raw query should hold the collision: %v", raw)
	}
	ms, err := QueryMessages(ctx, h, x, sdk.Query{Topic: "T", Key: "Aa", Max: 64})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{aa2.PhysOffset, dup.PhysOffset, uniq.PhysOffset, aa1.PhysOffset}
	if got := offsetsOf(ms); !slices.Equal(got, want) {
		t.Fatalf("QueryMessages = %v, want %v (other topic %d, collision %d)", got, want, other.PhysOffset, bb.PhysOffset)
	}
	for _, m := range ms {
		if !bytes.Equal(m.Data, l.data[m.Offset]) || m.Record.PhysOffset != m.Offset || m.Record.Topic != "T" {
			t.Fatalf("message %+v", m)
		}
	}
	// Exact time bounds (the index has second granularity).
	ms, _ = QueryMessages(ctx, h, x, sdk.Query{Topic: "T", Key: "Aa", Begin: uniq.StoreTimestamp, End: dup.StoreTimestamp, Max: 64})
	if got := offsetsOf(ms); !slices.Equal(got, []int64{dup.PhysOffset, uniq.PhysOffset}) {
		t.Fatalf("time range: %v", got)
	}
	// Records below the log minimum are gone.
	h.setMin(uniq.PhysOffset + 1)
	ms, _ = QueryMessages(ctx, h, x, sdk.Query{Topic: "T", Key: "Aa", Max: 64})
	if got := offsetsOf(ms); !slices.Equal(got, []int64{aa2.PhysOffset, dup.PhysOffset}) {
		t.Fatalf("after retention: %v", got)
	}
	// An index that errs.
	x.Stop(ctx)
	if _, err := QueryMessages(ctx, h, x, sdk.Query{Topic: "T", Key: "Aa", Max: 64}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("stopped index: %v", err)
	}
}

func TestByID(t *testing.T) {
	l := newTestLog()
	h := &fakeHost{log: l}
	for range 5 {
		l.add(t, "T", "k", "", 0, 1)
	}
	r := l.recs[3]
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	for _, idx := range []sdk.Indexer{nil, openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(3, 10))} {
		m, err := ByID(ctx, h, idx, record.OffsetMsgID(host, r.PhysOffset))
		if err != nil {
			t.Fatal(err)
		}
		if m.Offset != r.PhysOffset || m.Record.StoreHost != host || !bytes.Equal(m.Data, l.data[r.PhysOffset]) {
			t.Fatalf("ByID = %+v", m)
		}
		if _, err := ByID(ctx, h, idx, "nonsense"); !errors.Is(err, record.ErrBadMsgID) {
			t.Fatalf("bad id: %v", err)
		}
		if _, err := ByID(ctx, h, idx, record.OffsetMsgID(host, r.PhysOffset+1)); !errors.Is(err, sdk.ErrOffset) {
			t.Fatalf("not a record boundary: %v", err)
		}
		if _, err := ByID(ctx, h, idx, record.OffsetMsgID(host, l.next)); !errors.Is(err, sdk.ErrOffset) {
			t.Fatalf("beyond the log: %v", err)
		}
		if x, ok := idx.(*Index); ok {
			x.Stop(ctx)
		}
	}
}

// TestReadCache: hits after the asynchronous Set settles (Wait), misses
// when off, and no stale record after the log was cut and rewritten.
func TestReadCache(t *testing.T) {
	x := openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(3, 100))
	defer x.Stop(ctx)
	l := newTestLog()
	h := &fakeHost{log: l}
	for range 10 {
		mustIndex(t, x, l.add(t, "T", "k", "", 0, 1))
	}
	off := l.recs[4].PhysOffset
	b1, err := x.ReadRecord(ctx, h, off)
	if err != nil || !bytes.Equal(b1, l.data[off]) {
		t.Fatal(err)
	}
	x.cache.wait() // Set is asynchronous; after Wait it is applied or dropped
	reads := h.reads
	b2, err := x.ReadRecord(ctx, h, off)
	if err != nil || !bytes.Equal(b2, b1) {
		t.Fatal(err)
	}
	s := x.Stats().Cache
	if h.reads == reads {
		if s.Hits != 1 {
			t.Fatalf("served without a read but hits %d", s.Hits)
		}
	} else if s.SetsDropped == 0 {
		t.Fatalf("missed after Wait without a dropped set: %+v", s)
	}
	if s.Misses < 1 {
		t.Fatalf("stats %+v", s)
	}
	// The log is cut at record 4 and rewritten; once the index sees the
	// re-dispatch, the cached record is not served.
	l.cut(4)
	r := l.add(t, "T", "other", "", 0, 1)
	if r.PhysOffset != off {
		t.Fatal("setup")
	}
	mustIndex(t, x, r)
	b3, err := x.ReadRecord(ctx, h, off)
	if err != nil || !bytes.Equal(b3, l.data[off]) || bytes.Equal(b3, b1) {
		t.Fatalf("stale record served after a cut back")
	}
	ms, _ := QueryMessages(ctx, h, x, sdk.Query{Topic: "T", Key: "other", Max: 64})
	if len(ms) != 1 || ms[0].Offset != off {
		t.Fatalf("got %v", ms)
	}

	m, err := x.WriteMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"keel_index_hash_cache_hits_total ", "keel_index_hash_cache_misses_total ", "# TYPE keel_index_hash_cache_hits_total counter",
		"keel_index_hash_files 1", "keel_index_hash_truncations_total 1"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	st, err := x.Status(ctx)
	if err != nil || !strings.Contains(string(st), `"cache":{"enabled":true`) {
		t.Fatalf("status %s %v", st, err)
	}
}

func TestReadCacheOff(t *testing.T) {
	c := tinyConfig(3, 100)
	c.ReadCache = 0
	x := openIdx(t, vfs.NewCrashFS(1), "/i", c)
	defer x.Stop(ctx)
	l := newTestLog()
	h := &fakeHost{log: l}
	l.add(t, "T", "k", "", 0, 1)
	for range 3 {
		if _, err := x.ReadRecord(ctx, h, 0); err != nil {
			t.Fatal(err)
		}
	}
	if h.reads != 3 || x.Stats().Cache.Enabled || x.Stats().Cache.Hits != 0 {
		t.Fatalf("reads %d stats %+v", h.reads, x.Stats().Cache)
	}
}
