package host

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/host/timer"
	"github.com/keelmq/keel/sdk"
)

// candidates is an sdk.Indexer whose Query answers fixed offsets.
type candidates struct {
	offs []int64
	err  error
	got  sdk.Query
}

func (c *candidates) Configure(context.Context, sdk.Config) error { return nil }
func (c *candidates) Start(context.Context, sdk.Host) error       { return nil }
func (c *candidates) Stop(context.Context) error                  { return nil }
func (c *candidates) Index(context.Context, []sdk.Record) error   { return nil }
func (c *candidates) Sync(context.Context) error                  { return nil }
func (c *candidates) Query(_ context.Context, q sdk.Query) ([]int64, error) {
	c.got = q
	return c.offs, c.err
}

// TestQueryByKeyFilters: the index's candidates are read and kept only
// when the record is of the topic and holds the key (KEYS or UNIQ_KEY):
// hash collisions, other topics and offsets that hold no record are
// dropped; the index's order is kept, and at most maxNum come back.
func TestQueryByKeyFilters(t *testing.T) {
	n, _ := testNode(t)
	add := func(topic string, props map[string]string) int64 {
		t.Helper()
		r, err := n.store.Append(&record.Message{Topic: topic, Body: []byte("b"), Properties: record.EncodeProperties(props)})
		if err != nil {
			t.Fatal(err)
		}
		return r.PhysOffset
	}
	aa1 := add("T", map[string]string{record.PropertyKeys: "Aa"})
	bb := add("T", map[string]string{record.PropertyKeys: "BB"}) // Java's hash of Aa
	other := add("U", map[string]string{record.PropertyKeys: "Aa"})
	uniq := add("T", map[string]string{record.PropertyKeys: "x y", record.PropertyUniqKey: "Aa"})
	aa2 := add("T", map[string]string{record.PropertyKeys: "z Aa"})
	idx := &candidates{offs: []int64{aa2, uniq + 1, other, uniq, bb, aa1}}
	n.indexer = idx

	recs, err := n.QueryByKey(context.Background(), "T", "Aa", 0, 5, 6)
	if err != nil {
		t.Fatal(err)
	}
	if q := idx.got; q.Topic != "T" || q.Key != "Aa" || q.Begin != 5 || q.End != 6 || q.Max != 64 {
		t.Fatalf("index asked %+v", q)
	}
	want := []int64{aa2, uniq, aa1}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d (offsets %v)", len(recs), len(want), want)
	}
	for i, rec := range recs {
		r, err := record.Decode(rec)
		if err != nil || r.PhysOffset != want[i] {
			t.Fatalf("record %d: %+v %v, want offset %d", i, r, err, want[i])
		}
		stored, _ := n.store.ReadRecord(want[i])
		if !bytes.Equal(rec, stored) {
			t.Fatalf("record %d is not the stored bytes", i)
		}
	}
	if recs, _ := n.QueryByKey(context.Background(), "T", "Aa", 2, 0, 0); len(recs) != 2 || idx.got.Max != 2 {
		t.Fatalf("maxNum 2: %d records, index asked %+v", len(recs), idx.got)
	}
	idx.err = sdk.ErrUnavailable
	if _, err := n.QueryByKey(context.Background(), "T", "Aa", 0, 0, 0); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("index error: %v", err)
	}
	n.indexer = nil
	if _, err := n.QueryByKey(context.Background(), "T", "Aa", 0, 0, 0); !errors.Is(err, remoting.ErrNotSupported) {
		t.Fatalf("no index: %v", err)
	}
}

// TestParkedRecordsAreNotIndexed: a record parked in the timer topic goes
// to the index plugin without keys, while the same UNIQ_KEY on a real
// topic is indexed; a query by key on the timer topic is refused by name,
// not answered with nothing.
func TestParkedRecordsAreNotIndexed(t *testing.T) {
	n := startTestNode(t, "index.plugin=hash")
	ctx := context.Background()
	props := record.EncodeProperties(map[string]string{record.PropertyUniqKey: "U1", record.PropertyKeys: "K1"})
	if _, err := n.store.Append(&record.Message{Topic: timer.Topic, Body: []byte("parked"), Properties: props}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.store.Append(&record.Message{Topic: "T", Body: []byte("real"), Properties: props}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := n.QueryByKey(ctx, "T", "K1", 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the real topic's record was not indexed: %d records", len(recs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, key := range []string{"U1", "K1"} {
		offs, err := n.indexer.Query(ctx, sdk.Query{Topic: timer.Topic, Key: key, Max: 8})
		if err != nil || len(offs) != 0 {
			t.Fatalf("the index holds the parked record under %s: %v %v", key, offs, err)
		}
	}
	_, err := n.QueryByKey(ctx, timer.Topic, "U1", 0, 0, 0)
	if !errors.Is(err, remoting.ErrNotSupported) || !strings.Contains(err.Error(), "query the real topic") {
		t.Fatalf("query on the timer topic: %v, want a refusal saying what to query", err)
	}
}
