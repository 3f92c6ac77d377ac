package indexhash

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
)

// TestQueryCandidates: with one slot everything collides; Query returns
// every record of the key, newest first, and may hold hash collisions
// (Java's "Aa"/"BB"), which the host filters by reading the records
// (host's QueryByKey tests hold that side).
func TestQueryCandidates(t *testing.T) {
	x := openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(1, 100)) // one slot: everything collides
	defer x.Stop(ctx)
	l := newTestLog()
	aa1 := l.add(t, "T", "Aa", "", 0, 1000)
	bb := l.add(t, "T", "BB", "", 0, 1000) // same hash as Aa
	l.add(t, "U", "Aa", "", 0, 1000)
	uniq := l.add(t, "T", "x y", "Aa", 0, 1000) // Aa as UNIQ_KEY
	dup := l.add(t, "T", "Aa Aa", "", 0, 1000)  // listed twice
	aa2 := l.add(t, "T", "z Aa", "", 0, 1000)
	mustIndex(t, x, l.recs...)

	raw := mustQuery(t, x, sdk.Query{Topic: "T", Key: "Aa", Max: 64})
	if !slices.Contains(raw, bb.PhysOffset) {
		t.Fatalf("the raw query should hold the collision: %v", raw)
	}
	var matches []int64
	for _, off := range raw {
		if off != bb.PhysOffset && (len(matches) == 0 || matches[len(matches)-1] != off) {
			matches = append(matches, off)
		}
	}
	if want := []int64{aa2.PhysOffset, dup.PhysOffset, uniq.PhysOffset, aa1.PhysOffset}; !slices.Equal(matches, want) {
		t.Fatalf("Query = %v, want %v and the collision %d", raw, want, bb.PhysOffset)
	}
	// An index that errs.
	x.Stop(ctx)
	if _, err := x.Query(ctx, sdk.Query{Topic: "T", Key: "Aa", Max: 64}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("stopped index: %v", err)
	}
}

// TestMetrics: the exposition is typed and counts a cut back.
func TestMetrics(t *testing.T) {
	x := openIdx(t, vfs.NewCrashFS(1), "/i", tinyConfig(3, 100))
	defer x.Stop(ctx)
	l := newTestLog()
	for range 10 {
		mustIndex(t, x, l.add(t, "T", "k", "", 0, 1))
	}
	// The log is cut at record 4 and rewritten: the index cuts back.
	l.cut(4)
	mustIndex(t, x, l.add(t, "T", "other", "", 0, 1))
	m, err := x.WriteMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"keel_index_hash_records_total ", "keel_index_hash_queries_total ", "# TYPE keel_index_hash_truncations_total counter",
		"# TYPE keel_index_hash_files gauge", "keel_index_hash_files 1", "keel_index_hash_truncations_total 1"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
}
