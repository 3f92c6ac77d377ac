package indexhash

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/netip"
	"slices"
	"sync"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
)

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testLog is a commitlog stand-in: encoded records at contiguous offsets.
type testLog struct {
	recs []sdk.Record
	data map[int64][]byte
	next int64
	ts   int64
	min  int64
}

func newTestLog() *testLog {
	return &testLog{data: map[int64][]byte{}, ts: 1_700_000_000_000}
}

// add appends a record with the given keys; the store timestamp advances
// by step ms.
func (l *testLog) add(t tb, topic, keys, uniq string, sysFlag int32, step int64) sdk.Record {
	t.Helper()
	props := map[string]string{}
	if keys != "" {
		props[record.PropertyKeys] = keys
	}
	if uniq != "" {
		props[record.PropertyUniqKey] = uniq
	}
	m := &record.Message{Topic: topic, Body: []byte("body " + keys), Properties: record.EncodeProperties(props), SysFlag: sysFlag,
		StoreHost: netip.MustParseAddrPort("127.0.0.1:10911")}
	b, err := record.Encode(nil, m, record.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	l.ts += step
	record.Stamp(b, int64(len(l.recs)), l.next, l.ts)
	r := sdk.Record{Topic: topic, PhysOffset: l.next, Size: int32(len(b)), StoreTimestamp: l.ts, SysFlag: sysFlag, Keys: keys, UniqKey: uniq,
		QueueOffset: int64(len(l.recs))}
	l.data[l.next] = b
	l.recs = append(l.recs, r)
	l.next += int64(len(b))
	return r
}

// cut drops the records at and after index i (a truncated log).
func (l *testLog) cut(i int) {
	for _, r := range l.recs[i:] {
		delete(l.data, r.PhysOffset)
	}
	if i < len(l.recs) {
		l.next = l.recs[i].PhysOffset
	}
	l.recs = l.recs[:i]
}

// fakeHost is an sdk.Host over a testLog; methods the index does not use
// panic (the embedded nil interface).
type fakeHost struct {
	sdk.Host
	mu    sync.Mutex
	log   *testLog
	reads int
}

func (h *fakeHost) setMin(m int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log.min = m
}

func (h *fakeHost) Positions(ctx context.Context) (sdk.Positions, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sdk.Positions{Min: h.log.min, Dispatched: h.log.next, Confirm: h.log.next, Flushed: h.log.next, Committed: h.log.next}, nil
}

func (h *fakeHost) ReadRecord(ctx context.Context, off int64) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	b, ok := h.log.data[off]
	if !ok || off < h.log.min {
		return nil, fmt.Errorf("no record at %d: %w", off, sdk.ErrOffset)
	}
	return slices.Clone(b), nil
}

func tinyConfig(slots, entries int) Config {
	c := DefaultConfig()
	c.HashSlots, c.EntriesPerFile = slots, entries
	c.CleanInterval = 0
	return c
}

func openIdx(t tb, fsys vfs.FS, dir string, c Config) *Index {
	t.Helper()
	x, err := Open(dir, c, WithFS(fsys), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func mustIndex(t tb, x *Index, recs ...sdk.Record) {
	t.Helper()
	if err := x.Index(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
}

func mustQuery(t tb, x *Index, q sdk.Query) []int64 {
	t.Helper()
	offs, err := x.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// rebuild indexes recs from scratch into a fresh index on its own FS.
func rebuild(t tb, c Config, recs []sdk.Record) *Index {
	t.Helper()
	x := openIdx(t, vfs.NewCrashFS(1), "/scratch", c)
	for i := 0; i < len(recs); i += 100 {
		mustIndex(t, x, recs[i:min(i+100, len(recs))]...)
	}
	return x
}

// queriesFor returns queries for every topic/key the records use, a few
// keys they do not, with several time ranges and limits.
func queriesFor(recs []sdk.Record, rng *rand.Rand) []sdk.Query {
	type tk struct{ topic, key string }
	seen := map[tk]bool{}
	var keys []tk
	addKey := func(topic, key string) {
		if k := (tk{topic, key}); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, r := range recs {
		if r.UniqKey != "" {
			addKey(r.Topic, r.UniqKey)
		}
		for k := range record.IndexKeys(r.Keys) {
			addKey(r.Topic, k)
		}
	}
	addKey("nope", "k1")
	addKey("T0", "missing")
	var lo, hi int64
	if len(recs) > 0 {
		lo, hi = recs[0].StoreTimestamp, recs[len(recs)-1].StoreTimestamp
	}
	var qs []sdk.Query
	for _, k := range keys {
		qs = append(qs, sdk.Query{Topic: k.topic, Key: k.key, Max: 64})
		qs = append(qs, sdk.Query{Topic: k.topic, Key: k.key, Max: 3})
		if hi > lo {
			a := lo + rng.Int63n(hi-lo+1)
			b := a + rng.Int63n(hi-a+1)
			qs = append(qs, sdk.Query{Topic: k.topic, Key: k.key, Begin: a, End: b, Max: 64})
			qs = append(qs, sdk.Query{Topic: k.topic, Key: k.key, Begin: a, Max: 64})
		}
	}
	return qs
}

// sameIndex fails unless got answers every query exactly as want does and
// their files hold the same entries.
func sameIndex(t tb, got, want *Index, qs []sdk.Query) {
	t.Helper()
	gf, wf := got.Files(), want.Files()
	strip := func(fs []FileInfo) []FileInfo {
		out := make([]FileInfo, len(fs))
		for i, f := range fs {
			f.Name, f.EndTimestamp = "", 0
			out[i] = f
		}
		return out
	}
	if g, w := strip(gf), strip(wf); !slices.Equal(g, w) {
		i := 0
		for i < len(g) && i < len(w) && g[i] == w[i] {
			i++
		}
		var gi, wi any = "none", "none"
		if i < len(g) {
			gi = g[i]
		}
		if i < len(w) {
			wi = w[i]
		}
		t.Fatalf("files differ (%d vs %d files), first at %d:\n got %+v\nwant %+v", len(g), len(w), i, gi, wi)
	}
	for _, q := range qs {
		g, w := mustQuery(t, got, q), mustQuery(t, want, q)
		if !slices.Equal(g, w) {
			t.Fatalf("query %+v:\n got %v\nwant %v", q, g, w)
		}
	}
}
