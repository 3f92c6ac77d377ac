package storehost

import (
	"context"
	"slices"
	"testing"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
)

// batchIndexer records the batches Index is given.
type batchIndexer struct {
	sdk.Indexer
	got   [][]sdk.Record
	first []*sdk.Record // &batch[0] of each call
}

func (b *batchIndexer) Index(_ context.Context, batch []sdk.Record) error {
	b.got = append(b.got, slices.Clone(batch))
	b.first = append(b.first, &batch[0])
	return nil
}

// TestListenerUnindexed: records of an Unindexed topic reach the indexer
// in their place without keys; the others, and the store's batch itself,
// are untouched; a batch with none is passed as it is.
func TestListenerUnindexed(t *testing.T) {
	ix := &batchIndexer{}
	asked := 0
	l := &Listener{Indexer: ix, Unindexed: func(topic string) bool { asked++; return topic == "P" }}
	batch := []core.DispatchRecord{
		{Topic: "T", PhysOffset: 0, Keys: "a", UniqKey: "u0"},
		{Topic: "P", PhysOffset: 10, Keys: "b", UniqKey: "u1"},
		{Topic: "P", PhysOffset: 20, UniqKey: "u2"},
		{Topic: "P", PhysOffset: 30},
		{Topic: "T", PhysOffset: 40, Keys: "c"},
	}
	orig := slices.Clone(batch)
	if err := l.Dispatch(batch); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(batch, orig) {
		t.Fatalf("the store's batch was changed: %+v", batch)
	}
	want := slices.Clone(orig)
	want[1].Keys, want[1].UniqKey, want[2].UniqKey = "", "", ""
	if len(ix.got) != 1 || !slices.Equal(ix.got[0], want) {
		t.Fatalf("indexer got %+v, want %+v", ix.got, want)
	}
	if asked != 3 { // once per run of one topic among records with keys
		t.Fatalf("Unindexed asked %d times, want 3", asked)
	}
	plain := []core.DispatchRecord{{Topic: "T", Keys: "a"}, {Topic: "U", UniqKey: "u"}}
	if err := l.Dispatch(plain); err != nil {
		t.Fatal(err)
	}
	if ix.first[1] != &plain[0] || !slices.Equal(ix.got[1], plain) {
		t.Fatalf("a batch without parked records was copied or changed: %+v", ix.got[1])
	}
}
