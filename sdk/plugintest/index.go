package plugintest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk"
)

// RunIndex runs the indexer conformance suite. newPlugin returns a fresh,
// unconfigured instance each time it is called. The store feeds the
// indexer through a dispatch listener, as the host does. The subtests
// check that:
//
//   - RejectsUnknownConfigKey: Configure refuses an unknown key in
//     [index.config] with sdk.ErrInvalidConfig naming the key.
//   - Query: after records with KEYS (one or several keys) and UNIQ_KEY
//     are dispatched, a query by topic and key returns offsets strictly
//     newest first, at most Max of them; once filtered the way the host
//     filters (reading each record's topic, keys and timestamp) they are
//     exactly the matching records, newest first (with a small Max: the
//     newest ones); a time range [Begin, End] restricts them by store
//     timestamp; another topic's records never match.
//   - Idempotent: indexing every batch again, in order, and the last
//     batch twice more, changes no answer (no duplicates).
//   - SyncPowerCut: after Sync, more indexing, a power cut of the store
//     (vfs.CrashFS) and of the plugin (an external plugin's process is
//     killed; an in-process one is stopped) and a reopen with a new
//     instance on the same data directory, queries return every record
//     answered before the cut, and exactly the records the recovered log
//     holds.
func RunIndex(t *testing.T, newPlugin func(t *testing.T) sdk.Indexer, opts ...Option) {
	o := buildOptions(opts)
	t.Run("RejectsUnknownConfigKey", func(t *testing.T) {
		checkRejectsUnknownKey(t, newPlugin(t), writeProfile(t, "index", "", withUnknownKey(o.config)))
	})
	t.Run("QueryAndIdempotence", func(t *testing.T) { indexQuery(t, newPlugin, o) })
	t.Run("SyncPowerCut", func(t *testing.T) { indexPowerCut(t, newPlugin, o) })
}

var errNotStarted = errors.New("plugintest: indexer not started yet")

// gate is the dispatch listener between the store and the indexer under
// test: it holds dispatch back until the indexer is started, records the
// batches it passed, checks they come in log order, and lets the test call
// Index itself without running concurrently with the dispatcher.
type gate struct {
	mu      sync.Mutex // held across Index calls
	syncMu  sync.Mutex // held across Sync calls
	x       sdk.Indexer
	batches [][]sdk.Record
	next    int64 // offset after the last record passed
	err     error // first order violation
}

func (g *gate) open(x sdk.Indexer) {
	g.mu.Lock()
	g.syncMu.Lock()
	g.x = x
	g.next = 0
	g.syncMu.Unlock()
	g.mu.Unlock()
}

func (g *gate) close() {
	g.mu.Lock()
	g.syncMu.Lock()
	g.x = nil
	g.syncMu.Unlock()
	g.mu.Unlock()
}

func (g *gate) Dispatch(batch []core.DispatchRecord) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.x == nil {
		return errNotStarted
	}
	recs := make([]sdk.Record, len(batch))
	for i, r := range batch {
		if g.next > r.PhysOffset && g.err == nil {
			g.err = fmt.Errorf("dispatch passed record %d after %d", r.PhysOffset, g.next)
		}
		g.next = r.PhysOffset + int64(r.Size)
		recs[i] = sdk.Record{Topic: r.Topic, QueueID: r.QueueID, QueueOffset: r.QueueOffset, PhysOffset: r.PhysOffset,
			Size: r.Size, TagsCode: r.TagsCode, StoreTimestamp: r.StoreTimestamp, SysFlag: r.SysFlag, Keys: r.Keys, UniqKey: r.UniqKey}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.x.Index(ctx, recs); err != nil {
		return err
	}
	g.batches = append(g.batches, recs)
	return nil
}

func (g *gate) Sync() error {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	if g.x == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return g.x.Sync(ctx)
}

// reindex passes every recorded batch to the indexer again, in order, then
// the last one twice more, while the dispatcher is held back.
func (g *gate) reindex(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all := append(slices.Clip(g.batches), g.batches[len(g.batches)-1], g.batches[len(g.batches)-1])
	for _, b := range all {
		if err := g.x.Index(ctx, b); err != nil {
			t.Fatalf("Index of a batch already indexed: %v", err)
		}
	}
}

// waitDispatched waits until everything committed is dispatched.
func waitDispatched(t *testing.T, e *env) {
	t.Helper()
	if !eventually(10*time.Second, func() bool {
		p := e.store.Positions()
		return p.Dispatched >= p.Committed
	}) {
		t.Fatalf("dispatch stuck at %+v (the indexer keeps failing?)", e.store.Positions())
	}
}

// indexKeys is the key set the index checks use.
func indexKey(i int) string { return fmt.Sprintf("key-%d", i%13) }

// appendIndexed appends n records spread over two topics; most have one
// key, every fifth has two, every seventh has a UNIQ_KEY.
func appendIndexed(t *testing.T, e *env, n int, tag string) {
	t.Helper()
	for i := 0; i < n; i++ {
		topic := "IdxA"
		if i%3 == 2 {
			topic = "IdxB"
		}
		keys := indexKey(i)
		if i%5 == 0 {
			keys += " " + indexKey(i+6)
		}
		m := message(topic, int32(i%2), fmt.Sprintf("%s-%d", tag, i), keys)
		if i%7 == 0 {
			m.Properties = record.SetProperty(m.Properties, "UNIQ_KEY", fmt.Sprintf("U-%s-%d", tag, i))
		}
		if _, err := e.store.Append(m); err != nil {
			t.Fatal(err)
		}
	}
}

// query runs q and checks the answer against recs, the records the store
// holds: at most Max offsets, strictly decreasing; filtered as the host
// does, a prefix of the matching records newest first; all of them when
// Max is not smaller than their number and no collision took a slot. It
// returns the raw and the filtered answer.
func query(t *testing.T, x sdk.Indexer, recs []storedRecord, q sdk.Query) (raw, filtered []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := x.Query(ctx, q)
	if err != nil {
		t.Fatalf("Query %+v: %v", q, err)
	}
	if len(raw) > q.Max {
		t.Errorf("Query %+v returned %d offsets, more than Max", q, len(raw))
	}
	for i := 1; i < len(raw); i++ {
		if raw[i] >= raw[i-1] {
			t.Errorf("Query %+v: offsets not strictly newest first: %v", q, raw)
			break
		}
	}
	byOff := make(map[int64]storedRecord, len(recs))
	var want []int64
	match := func(r storedRecord) bool {
		return r.topic == q.Topic && r.hasKey(q.Key) && (q.Begin == 0 || r.ts >= q.Begin) && (q.End == 0 || r.ts <= q.End)
	}
	for _, r := range recs {
		byOff[r.off] = r
		if match(r) {
			want = append(want, r.off)
		}
	}
	slices.Reverse(want)
	for _, off := range raw {
		if r, ok := byOff[off]; ok && match(r) {
			filtered = append(filtered, off)
		}
	}
	if len(filtered) > len(want) || !slices.Equal(filtered, want[:len(filtered)]) {
		t.Errorf("Query %+v: matching offsets %v, want the newest of %v", q, filtered, want)
		return raw, filtered
	}
	if len(filtered) == len(raw) && len(filtered) < min(q.Max, len(want)) {
		t.Errorf("Query %+v: %d matching offsets %v, want %d: %v", q, len(filtered), filtered, min(q.Max, len(want)), want[:min(q.Max, len(want))])
	}
	return raw, filtered
}

// queries lists the queries the index checks run over recs.
func queries(recs []storedRecord) []sdk.Query {
	var qs []sdk.Query
	for i := 0; i < 13; i++ {
		for _, topic := range []string{"IdxA", "IdxB"} {
			qs = append(qs, sdk.Query{Topic: topic, Key: indexKey(i), Max: 100000})
		}
	}
	qs = append(qs,
		sdk.Query{Topic: "IdxA", Key: indexKey(1), Max: 3},
		sdk.Query{Topic: "IdxB", Key: indexKey(2), Max: 1},
		sdk.Query{Topic: "IdxC", Key: indexKey(1), Max: 100},       // no such topic
		sdk.Query{Topic: "IdxA", Key: "no-such-key", Max: 100},     // no such key
		sdk.Query{Topic: "IdxA", Key: indexKey(3), Max: 0},         // Max 0: nothing
		sdk.Query{Topic: "IdxA", Key: "U-a-0", Max: 10},            // UNIQ_KEY
		sdk.Query{Topic: "IdxB", Key: "U-a-14", Max: 10},           // UNIQ_KEY
		sdk.Query{Topic: "IdxA", Key: "U-a-14", Max: 10},           // another topic's UNIQ_KEY
		sdk.Query{Topic: "IdxA", Key: indexKey(6) + " x", Max: 10}, // not a key
	)
	if len(recs) > 10 {
		lo, hi := recs[len(recs)/4].ts, recs[len(recs)/2].ts
		for i := 0; i < 13; i += 4 {
			qs = append(qs,
				sdk.Query{Topic: "IdxA", Key: indexKey(i), Begin: lo, End: hi, Max: 100000},
				sdk.Query{Topic: "IdxA", Key: indexKey(i), Begin: hi, Max: 100000},
				sdk.Query{Topic: "IdxB", Key: indexKey(i), End: lo, Max: 100000},
				sdk.Query{Topic: "IdxB", Key: indexKey(i), Begin: lo, End: hi, Max: 2},
			)
		}
	}
	return qs
}

func indexQuery(t *testing.T, newPlugin func(t *testing.T) sdk.Indexer, o options) {
	g := &gate{}
	e := newEnv(t, o, false, g)
	x := newPlugin(t)
	start(t, x, writeProfile(t, "index", "", o.config), e.host)
	g.open(x)
	n := o.producers * o.perProducer
	appendIndexed(t, e, n/2, "a")
	waitDispatched(t, e)
	appendIndexed(t, e, n-n/2, "b") // a second round of dispatch batches
	waitDispatched(t, e)
	if g.err != nil {
		t.Fatal(g.err)
	}
	recs := scan(t, e.store)
	qs := queries(recs)
	before := make([][]int64, len(qs))
	for i, q := range qs {
		before[i], _ = query(t, x, recs, q)
	}
	if t.Failed() {
		return
	}
	// Idempotence.
	g.reindex(t)
	for i, q := range qs {
		raw, _ := query(t, x, recs, q)
		if !slices.Equal(raw, before[i]) {
			t.Errorf("Query %+v after indexing the same batches again: %v, before %v", q, raw, before[i])
		}
	}
}

func indexPowerCut(t *testing.T, newPlugin func(t *testing.T) sdk.Indexer, o options) {
	g := &gate{}
	quiet := o
	quiet.logLevel = 100 // the cut makes the store log expected I/O errors
	e := newEnv(t, quiet, true, g)
	cfg := writeProfile(t, "index", "", o.config)
	x := newPlugin(t)
	lc := start(t, x, cfg, e.host)
	g.open(x)

	// Durable part: appended, flushed, dispatched, synced.
	appendIndexed(t, e, o.producers*o.perProducer/2, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.host.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, e)
	if err := g.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	recs := scan(t, e.store)
	qs := queries(recs)
	answers := make([][]int64, len(qs))
	for i, q := range qs {
		_, answers[i] = query(t, x, recs, q)
	}
	// Volatile part: appended and indexed, never flushed.
	appendIndexed(t, e, o.producers*o.perProducer/4, "v")
	waitDispatched(t, e)

	e.powerCut(func() {
		g.close()
		lc.crash()
	})

	x2 := newPlugin(t)
	start(t, x2, cfg, e.host)
	g.open(x2)
	waitDispatched(t, e)
	recs2 := scan(t, e.store)
	for i, q := range qs {
		_, got := query(t, x2, recs2, q)
		for _, off := range answers[i] {
			if !slices.Contains(got, off) && len(got) < q.Max {
				t.Errorf("Query %+v after the power cut lost offset %d: before %v, after %v", q, off, answers[i], got)
				break
			}
		}
	}
	// The records the cut kept beyond the durable part are found too.
	for _, q := range queries(recs2) {
		query(t, x2, recs2, q)
	}
	t.Logf("log: %d records synced before the cut, %d after recovery", len(recs), len(recs2))
}
