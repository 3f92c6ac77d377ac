package indexhash

import (
	"slices"
	"testing"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"pgregory.net/rapid"
)

// modelEntry is one key the model says the index holds.
type modelEntry struct {
	hash int32
	phy  int64
	ts   int64
}

// modelEntries lists the entries of recs in insertion order.
func modelEntries(recs []sdk.Record) []modelEntry {
	var out []modelEntry
	for _, r := range recs {
		if record.TransactionType(r.SysFlag) == record.SysFlagTransactionRollback {
			continue
		}
		if r.UniqKey != "" {
			out = append(out, modelEntry{keyHash(r.Topic, r.UniqKey), r.PhysOffset, r.StoreTimestamp})
		}
		for k := range record.IndexKeys(r.Keys) {
			out = append(out, modelEntry{keyHash(r.Topic, k), r.PhysOffset, r.StoreTimestamp})
		}
	}
	return out
}

// modelQuery answers q as the index must: the entries whose hash is
// topic#key's and whose second meets the range (timestamps are whole
// seconds here), newest first, at most Max.
func modelQuery(es []modelEntry, q sdk.Query, maxQuery int) []int64 {
	if q.Max <= 0 {
		return nil
	}
	end := q.End
	if end == 0 {
		end = 1<<63 - 1
	}
	if end < q.Begin {
		return nil
	}
	h := keyHash(q.Topic, q.Key)
	var out []int64
	for i := len(es) - 1; i >= 0 && len(out) < min(q.Max, maxQuery); i-- {
		if e := es[i]; e.hash == h && e.ts+999 >= q.Begin && e.ts <= end {
			out = append(out, e.phy)
		}
	}
	return out
}

// TestPropertyModel drives the index with appends, re-dispatches, divergent
// rewrites, syncs, clean reopens and power cuts, and checks every query
// against a model: the list of keys of the records indexed, in order.
// Store timestamps are whole seconds and never go back, so the index's
// second granularity and early stops are exact.
func TestPropertyModel(t *testing.T) {
	keys := []string{"a", "b", "Aa", "BB", "c d", "k1", "k2"} // "Aa"/"BB" collide
	rapid.Check(t, func(rt *rapid.T) {
		c := tinyConfig(rapid.IntRange(1, 7).Draw(rt, "slots"), rapid.IntRange(2, 9).Draw(rt, "entries"))
		c.MaxQuery = rapid.IntRange(1, 20).Draw(rt, "maxQuery")
		fs := vfs.NewCrashFS(rapid.Int64().Draw(rt, "fsSeed"))
		x := openIdx(rt, fs, "/p", c)
		defer func() { x.Stop(ctx) }()
		l := newTestLog()
		indexed := 0 // records of l the index holds (a prefix)
		synced := 0  // records durably indexed
		gen := func(rt *rapid.T) {
			topic := rapid.SampledFrom([]string{"T", "U"}).Draw(rt, "topic")
			ks := rapid.SliceOfN(rapid.SampledFrom(keys), 0, 3).Draw(rt, "keys")
			uniq := ""
			if rapid.Bool().Draw(rt, "hasUniq") {
				uniq = rapid.SampledFrom(keys).Draw(rt, "uniq")
			}
			var sf int32
			if rapid.IntRange(0, 9).Draw(rt, "rollback") == 0 {
				sf = record.SysFlagTransactionRollback
			}
			l.add(rt, topic, joinKeys(ks), uniq, sf, 1000*int64(rapid.IntRange(0, 2).Draw(rt, "step")))
		}
		catchUp := func(rt *rapid.T, from int) {
			for i := from; i < len(l.recs); {
				n := rapid.IntRange(1, 5).Draw(rt, "batch")
				mustIndex(rt, x, l.recs[i:min(i+n, len(l.recs))]...)
				i += n
			}
			indexed = len(l.recs)
		}
		check := func(rt *rapid.T) {
			es := modelEntries(l.recs[:indexed])
			for range 4 {
				q := sdk.Query{Topic: rapid.SampledFrom([]string{"T", "U"}).Draw(rt, "qtopic"), Key: rapid.SampledFrom(append(keys, "zz")).Draw(rt, "qkey"),
					Max: rapid.IntRange(0, 25).Draw(rt, "qmax")}
				if len(l.recs) > 0 && rapid.Bool().Draw(rt, "ranged") {
					lo, hi := l.recs[0].StoreTimestamp-1500, l.recs[len(l.recs)-1].StoreTimestamp+1500
					q.Begin = rapid.Int64Range(lo, hi).Draw(rt, "begin")
					q.End = rapid.Int64Range(lo, hi).Draw(rt, "end")
				}
				got, want := mustQuery(rt, x, q), modelQuery(es, q, c.MaxQuery)
				if !slices.Equal(got, want) {
					rt.Fatalf("query %+v = %v, model %v; index %+v, ckpt %+v", q, got, want, x.Stats(), x.ckw.last)
				}
			}
			if in, _ := x.Offsets(); indexed > 0 && in != l.recs[indexed-1].PhysOffset+int64(l.recs[indexed-1].Size) {
				rt.Fatalf("indexed offset %d", in)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"": check,
			"append": func(rt *rapid.T) {
				for range rapid.IntRange(1, 8).Draw(rt, "n") {
					gen(rt)
				}
				catchUp(rt, indexed)
			},
			"redispatch": func(rt *rapid.T) {
				from := rapid.IntRange(0, indexed).Draw(rt, "from")
				if from < synced {
					synced = from // cutting back below the checkpoint lowers it
				}
				catchUp(rt, from)
			},
			"diverge": func(rt *rapid.T) {
				at := rapid.IntRange(0, len(l.recs)).Draw(rt, "at")
				l.cut(at)
				for range rapid.IntRange(1, 6).Draw(rt, "n") {
					gen(rt)
				}
				if at < synced {
					synced = at
				}
				if at < indexed {
					indexed = at
				}
				catchUp(rt, at)
			},
			"sync": func(rt *rapid.T) {
				if err := x.Sync(ctx); err != nil {
					rt.Fatal(err)
				}
				synced = indexed
			},
			"stopReopen": func(rt *rapid.T) {
				if err := x.Stop(ctx); err != nil {
					rt.Fatal(err)
				}
				synced = indexed
				x = openIdx(rt, fs, "/p", c)
			},
			"powerCut": func(rt *rapid.T) {
				fs.CrashWith(vfs.CrashOptions{TornPages: rapid.Bool().Draw(rt, "torn")})
				x.Stop(ctx)
				x = openIdx(rt, fs, "/p", c)
				indexed = synced
				check(rt)
				from := rapid.IntRange(0, synced).Draw(rt, "redispatchFrom")
				synced = from // the cut back lowers the checkpoint
				catchUp(rt, from)
			},
		})
	})
}

func joinKeys(ks []string) string {
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += " "
		}
		s += k
	}
	return s
}
