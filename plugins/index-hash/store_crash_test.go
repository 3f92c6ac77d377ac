package indexhash

import (
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// logRecords reads the whole log through host as dispatch would see it.
func logRecords(t tb, host sdk.Host) []sdk.Record {
	t.Helper()
	p, err := host.Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []sdk.Record
	for off := p.Min; off < p.Committed; {
		b, err := host.ReadLog(ctx, off, 256<<10)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			n, info, err := record.Check(b, false)
			if err != nil {
				t.Fatalf("log at %d: %v", off, err)
			}
			if !info.Blank {
				out = append(out, sdk.Record{Topic: info.Topic, QueueID: info.QueueID, QueueOffset: info.QueueOffset, PhysOffset: info.PhysOffset,
					Size: info.Size, TagsCode: info.TagsCode, StoreTimestamp: info.StoreTimestamp, SysFlag: info.SysFlag, Keys: info.Keys, UniqKey: info.UniqKey})
			}
			b = b[n:]
			off += int64(n)
		}
	}
	return out
}

func waitDispatched(t tb, st *core.Store) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p := st.Positions()
		if p.Dispatched >= p.Committed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatch stuck: %+v", p)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// TestStoreCrash runs the index as a dispatch listener of a real store on
// a crash-simulating filesystem: messages with keys are appended, the
// store is flushed and checkpointed (which syncs the index) and the index
// synced at random points, power is cut (or the store closed cleanly), and
// after reopening and letting dispatch catch up every query must answer
// exactly as an index rebuilt from scratch over the recovered log, and
// its candidates must hold exactly the log's records with each key.
func TestStoreCrash(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("KEEL_SEED"); v != "" {
		seed, _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("seed %d (KEEL_SEED replays the choices; goroutine timing still varies)", seed)
	rng := rand.New(rand.NewSource(seed))
	fs := vfs.NewCrashFS(seed)
	c := tinyConfig(11, 24)
	keyPool := 30
	var everTopics = []string{"T0", "T1", "T2"}
	crashes := 0
	for round := 0; round <= rounds; round++ {
		// This incarnation's view of the filesystem: killed at the power
		// cut, so the abandoned store and index cannot touch the
		// post-crash state (as no real crashed process can).
		kfs := vfs.NewKillable(fs)
		idx := openIdx(t, kfs, "/s/index", c)
		st, err := core.Open(core.Options{Dir: "/s/store", FS: kfs, Logger: quiet, SegmentSize: 16 << 10, MaxMessageSize: 4 << 10,
			CQEntriesPerFile: 64, CheckpointEvery: time.Hour, Listeners: []core.DispatchListener{&storehost.Listener{Indexer: idx}}})
		if err != nil {
			t.Fatalf("round %d: open store (core recovery, not the index): %v", round, err)
		}
		host := storehost.New(st, quiet)
		if err := idx.Start(ctx, host); err != nil {
			t.Fatal(err)
		}
		waitDispatched(t, st)
		recs := logRecords(t, host)
		scratch := rebuild(t, c, recs)
		var qs []sdk.Query
		for _, topic := range everTopics {
			for k := range keyPool {
				qs = append(qs, sdk.Query{Topic: topic, Key: "k" + strconv.Itoa(k), Max: 64})
			}
		}
		qs = append(qs, queriesFor(recs, rng)...)
		sameIndex(t, idx, scratch, qs)
		// The candidates hold exactly the records with the key (up to 64).
		byOffset := map[int64]sdk.Record{}
		for _, r := range recs {
			byOffset[r.PhysOffset] = r
		}
		has := func(r sdk.Record, q sdk.Query) bool {
			return r.Topic == q.Topic && record.TransactionType(r.SysFlag) != record.SysFlagTransactionRollback &&
				(r.UniqKey == q.Key || slices.Contains(slices.Collect(record.IndexKeys(r.Keys)), q.Key))
		}
		for _, q := range qs[:keyPool] {
			var want []int64
			for i := len(recs) - 1; i >= 0 && len(want) < 64; i-- {
				if has(recs[i], q) {
					want = append(want, recs[i].PhysOffset)
				}
			}
			// The index returns at most 64 candidates, duplicates (a key
			// listed twice) and collisions included, so they hold all
			// only when fewer than 64 came back.
			raw := mustQuery(t, idx, q)
			var got []int64
			for _, off := range raw {
				if r, ok := byOffset[off]; ok && has(r, q) && !slices.Contains(got, off) {
					got = append(got, off)
				}
			}
			if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) || (len(raw) < 64 && len(got) != len(want)) {
				t.Fatalf("round %d: candidates of %+v hold %v, want %v", round, q, got, want)
			}
		}
		scratch.Stop(ctx)
		if round == rounds {
			st.Close()
			idx.Stop(ctx)
			break
		}

		n := 20 + rng.Intn(150)
		for i := range n {
			var keys []string
			for range rng.Intn(4) {
				keys = append(keys, "k"+strconv.Itoa(rng.Intn(keyPool)))
			}
			props := map[string]string{}
			if len(keys) > 0 {
				props[record.PropertyKeys] = fmt.Sprint(keys)[1 : len(fmt.Sprint(keys))-1]
			}
			if rng.Intn(2) == 0 {
				props[record.PropertyUniqKey] = fmt.Sprintf("u%d-%d", round, i)
			}
			var sf int32
			if rng.Intn(20) == 0 {
				sf = record.SysFlagTransactionRollback
			}
			m := &record.Message{Topic: everTopics[rng.Intn(len(everTopics))], Body: make([]byte, rng.Intn(600)),
				Properties: record.EncodeProperties(props), SysFlag: sf}
			if _, err := st.Append(m); err != nil {
				t.Fatalf("round %d: append: %v", round, err)
			}
			switch rng.Intn(25) {
			case 0:
				st.Flush()
			case 1:
				if err := st.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			case 2:
				if err := idx.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			case 3:
				time.Sleep(time.Duration(rng.Intn(500)) * time.Microsecond)
			}
		}
		if rng.Intn(5) > 0 {
			crashes++
			kfs.Kill()
			fs.CrashWith(vfs.CrashOptions{TornPages: rng.Intn(2) == 0})
			st.Close()    // fails: its handles are detached
			idx.Stop(ctx) // likewise
		} else {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if err := idx.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d rounds, %d power cuts", rounds, crashes)
}
