package remoting

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelmq/keel/core/record"
	"pgregory.net/rapid"
)

type modelMember struct {
	conn int
	seen time.Time
}

// TestRegistryModel checks the consumer registry against a plain map model
// under random heartbeats, connection closes, unregistrations and expiry.
func TestRegistryModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := newRegistry()
		conns := []*Conn{{id: 1}, {id: 2}, {id: 3}}
		model := map[string]map[string]modelMember{}
		now := time.Unix(0, 0)
		groups := []string{"A", "B"}
		clients := []string{"c0", "c1", "c2", "c3"}

		modelRemove := func(pred func(g, id string, m modelMember) bool) []string {
			var changed []string
			for g, ms := range model {
				for id, m := range ms {
					if pred(g, id, m) {
						delete(ms, id)
						changed = appendOnce(changed, g)
					}
				}
				if len(ms) == 0 {
					delete(model, g)
				}
			}
			slices.Sort(changed)
			return changed
		}
		sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, fmt.Sprint("op", i)) {
			case 0:
				g := rapid.SampledFrom(groups).Draw(t, "g")
				id := rapid.SampledFrom(clients).Draw(t, "id")
				ci := rapid.IntRange(0, 2).Draw(t, "conn")
				now = now.Add(time.Duration(rapid.IntRange(0, 100).Draw(t, "dt")) * time.Second)
				changed := r.heartbeat(g, &member{clientID: id, conn: conns[ci], lastSeen: now})
				_, existed := model[g][id]
				if model[g] == nil {
					model[g] = map[string]modelMember{}
				}
				model[g][id] = modelMember{ci, now}
				if changed == existed {
					t.Fatalf("heartbeat %s/%s changed=%v, existed=%v", g, id, changed, existed)
				}
			case 1:
				ci := rapid.IntRange(0, 2).Draw(t, "conn")
				got := sorted(r.removeConn(conns[ci]))
				want := modelRemove(func(_, _ string, m modelMember) bool { return m.conn == ci })
				if !slices.Equal(got, want) {
					t.Fatalf("removeConn changed %v, want %v", got, want)
				}
			case 2:
				g := rapid.SampledFrom(groups).Draw(t, "g")
				id := rapid.SampledFrom(clients).Draw(t, "id")
				_, want := model[g][id]
				if got := r.unregister(g, id); got != want {
					t.Fatalf("unregister = %v, want %v", got, want)
				}
				modelRemove(func(mg, mid string, _ modelMember) bool { return mg == g && mid == id })
			case 3:
				cutoff := now.Add(-time.Duration(rapid.IntRange(0, 200).Draw(t, "age")) * time.Second)
				got := sorted(r.expire(cutoff))
				want := modelRemove(func(_, _ string, m modelMember) bool { return m.seen.Before(cutoff) })
				if !slices.Equal(got, want) {
					t.Fatalf("expire changed %v, want %v", got, want)
				}
			}
			for _, g := range groups {
				var want []string
				for id := range model[g] {
					want = append(want, id)
				}
				slices.Sort(want)
				if got := r.clientIDs(g); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Fatalf("group %s: %v, want %v", g, got, want)
				}
			}
		}
	})
}

func TestParseSubscription(t *testing.T) {
	for _, tc := range []struct {
		expr, typ string
		pass      []string
		fail      []string
		all       bool
	}{
		{"*", "TAG", nil, nil, true},
		{"", "", nil, nil, true},
		{" TagA ", "TAG", []string{"TagA"}, []string{"TagB", ""}, false},
		{"TagA||TagB || TagC", "", []string{"TagA", "TagB", "TagC"}, []string{"TagD"}, false},
	} {
		s := parseSubscription("T", tc.expr, tc.typ)
		f := s.filter()
		if (f == nil) != tc.all {
			t.Fatalf("%q: filter nil = %v", tc.expr, f == nil)
		}
		for _, tag := range tc.pass {
			if !f(tagsCodeOf(tag)) {
				t.Errorf("%q rejects %q", tc.expr, tag)
			}
		}
		for _, tag := range tc.fail {
			if f(tagsCodeOf(tag)) {
				t.Errorf("%q accepts %q", tc.expr, tag)
			}
		}
	}
	if !parseSubscription("T", "a > 1", "SQL92").isSQL() {
		t.Fatal("SQL92 not detected")
	}
}

func tagsCodeOf(tag string) int64 {
	if tag == "" {
		return 0
	}
	return record.TagsHashCode(tag)
}
