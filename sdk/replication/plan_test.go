package replication

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/keelmq/keel/sdk"
)

func TestDecide(t *testing.T) {
	e := func(pairs ...int64) []sdk.Epoch {
		var out []sdk.Epoch
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, sdk.Epoch{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
		}
		return out
	}
	tests := []struct {
		name          string
		master, slave View
		action        Action
		from, to      int64
		history       []sdk.Epoch
		reason        string
	}{
		{name: "fresh slave copies from the master's minimum",
			master: View{Min: 4096, End: 9000, Epochs: e(1, 0, 2, 5000)}, slave: View{},
			action: Stream, from: 4096, history: e(1, 0)},
		{name: "both fresh",
			master: View{}, slave: View{}, action: Stream, from: 0, history: e()},
		{name: "slave behind in the same epoch",
			master: View{End: 900, Epochs: e(1, 0)}, slave: View{End: 300, Epochs: e(1, 0)},
			action: Stream, from: 300, history: e(1, 0)},
		{name: "slave behind by epochs",
			master: View{End: 900, Epochs: e(1, 0, 2, 500)}, slave: View{End: 300, Epochs: e(1, 0)},
			action: Stream, from: 300, history: e(1, 0)},
		{name: "slave below the master's minimum",
			master: View{Min: 1000, End: 9000, Epochs: e(1, 0)}, slave: View{End: 300, Epochs: e(1, 0)},
			action: Refuse, reason: "wipe the replica"},
		{name: "wiped master catches up from the slave's whole log",
			master: View{}, slave: View{Min: 2048, End: 9000, Epochs: e(1, 0, 3, 4000)},
			action: CatchUp, from: 2048, to: 9000, history: e(1, 0, 3, 4000)},
		{name: "master lost its tail, wrote nothing since: catch up",
			master: View{End: 500, Epochs: e(1, 0, 2, 500)}, slave: View{End: 800, Epochs: e(1, 0)},
			action: CatchUp, from: 500, to: 800, history: e(1, 0)},
		{name: "returning old master truncated (takeover epoch)",
			master: View{End: 500, Epochs: e(1, 0, 2, 100, 4, 200), Takeovers: []int32{4}},
			slave:  View{End: 400, Epochs: e(1, 0, 2, 100, 3, 250)},
			action: Stream, from: 200, history: e(1, 0, 2, 100, 4, 200)},
		{name: "promoted master that has not written yet cuts the returning old master's tail",
			master: View{End: 500, Epochs: e(1, 0, 2, 500), Takeovers: []int32{2}}, slave: View{End: 800, Epochs: e(1, 0)},
			action: Stream, from: 500, history: e(1, 0, 2, 500)},
		{name: "master lost its tail and wrote since (restart epoch, no takeover): fence",
			master: View{End: 600, Epochs: e(1, 0, 2, 500)}, slave: View{End: 800, Epochs: e(1, 0)},
			action: Fence, reason: "ForceWrites"},
		{name: "after ForceWrites the replica's tail is cut",
			master: View{End: 600, Epochs: e(1, 0, 2, 500, 3, 600), Takeovers: []int32{3}}, slave: View{End: 800, Epochs: e(1, 0)},
			action: Stream, from: 500, history: e(1, 0, 2, 500)},
		{name: "replica holds a newer epoch: stale master fenced",
			master: View{End: 600, Epochs: e(1, 0)}, slave: View{End: 700, Epochs: e(1, 0, 2, 300)},
			action: Fence, reason: "stale master"},
		{name: "stale master that holds nothing beyond the promotion point catches up",
			master: View{End: 300, Epochs: e(1, 0)}, slave: View{End: 700, Epochs: e(1, 0, 2, 300)},
			action: CatchUp, from: 300, to: 700, history: e(1, 0, 2, 300)},
		{name: "no common epoch",
			master: View{End: 600, Epochs: e(2, 0)}, slave: View{End: 100, Epochs: e(1, 0)},
			action: Refuse, reason: "shares no epoch"},
		{name: "slave without history behind: classic offsets",
			master: View{End: 600, Epochs: e(1, 0)}, slave: View{End: 100},
			action: Stream, from: 100, history: e(1, 0)},
		{name: "slave without history ahead: fence",
			master: View{End: 600, Epochs: e(1, 0)}, slave: View{End: 700},
			action: Fence},
		{name: "truncation below the slave's minimum is refused",
			master: View{End: 500, Epochs: e(1, 0, 2, 100, 4, 200), Takeovers: []int32{4}},
			slave:  View{Min: 300, End: 400, Epochs: e(1, 0, 2, 100, 3, 250)},
			action: Refuse, reason: "below its oldest offset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.master, tc.slave)
			if d.Action != tc.action {
				t.Fatalf("got %v (%s), want %v", d.Action, d.Reason, tc.action)
			}
			if tc.action == Stream || tc.action == CatchUp {
				if d.From != tc.from || (tc.action == CatchUp && d.To != tc.to) {
					t.Fatalf("got [%d,%d), want [%d,%d)", d.From, d.To, tc.from, tc.to)
				}
				if len(d.History) != len(tc.history) || (len(tc.history) > 0 && !slices.Equal(d.History, tc.history)) {
					t.Fatalf("history %v, want %v", d.History, tc.history)
				}
			}
			if !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("reason %q lacks %q", d.Reason, tc.reason)
			}
		})
	}
}

type seg struct {
	epoch int32
	n     int64
}

func build(segs []seg) (hist []sdk.Epoch, log []int32) {
	for _, s := range segs {
		hist = append(hist, sdk.Epoch{Epoch: s.epoch, StartOffset: int64(len(log))})
		for i := int64(0); i < s.n; i++ {
			log = append(log, s.epoch)
		}
	}
	return hist, log
}

// TestDecideProperty generates two logs sharing a prefix of epochs (the
// last shared one possibly longer on one side) that continue under epochs
// each side won alone, with random takeover marks, and checks Decide's
// safety: a replica is truncated only below a takeover it did not see, a
// master catches up only when it is a prefix of the replica, what a node
// keeps always agrees with the other's log, and conflicts fence.
func TestDecideProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		epoch := int32(rapid.IntRange(1, 3).Draw(rt, "first"))
		var shared []seg
		for i, n := 0, rapid.IntRange(1, 4).Draw(rt, "shared"); i < n; i++ {
			shared = append(shared, seg{epoch, rapid.Int64Range(0, 5).Draw(rt, "n")})
			epoch += int32(rapid.IntRange(1, 2).Draw(rt, "gap"))
		}
		ms, ss := slices.Clone(shared), slices.Clone(shared)
		ms[len(ms)-1].n = rapid.Int64Range(0, 6).Draw(rt, "mLast")
		ss[len(ss)-1].n = rapid.Int64Range(0, 6).Draw(rt, "sLast")
		var takeovers []int32
		for i, n := 0, rapid.IntRange(0, 4).Draw(rt, "later"); i < n; i++ {
			s := seg{epoch, rapid.Int64Range(0, 5).Draw(rt, "n")}
			if rapid.Bool().Draw(rt, "masterWins") {
				ms = append(ms, s)
			} else {
				ss = append(ss, s)
			}
			if rapid.Bool().Draw(rt, "takeover") {
				takeovers = append(takeovers, epoch)
			}
			epoch += int32(rapid.IntRange(1, 2).Draw(rt, "gap"))
		}
		mh, mlog := build(ms)
		sh, slog := build(ss)
		mv := View{End: int64(len(mlog)), Epochs: mh, Takeovers: takeovers}
		sv := View{End: int64(len(slog)), Epochs: sh}
		d := Decide(mv, sv)
		common := 0
		for common < len(mlog) && common < len(slog) && mlog[common] == slog[common] {
			common++
		}
		slavePrefix := common == len(slog)
		masterPrefix := common == len(mlog)
		switch d.Action {
		case Stream:
			if d.From > int64(len(mlog)) || d.From > int64(common) {
				rt.Fatalf("stream from %d: master %v slave %v agree on %d", d.From, mlog, slog, common)
			}
			if sv.Empty() {
				break
			}
			if d.From < sv.End {
				lastS, lastM := sv.LastEpoch(), mv.LastEpoch()
				if !(lastM > lastS && takeoverIn(lastS, lastM, takeovers)) {
					rt.Fatalf("replica truncated from %d to %d without a takeover: master %v slave %v takeovers %v", sv.End, d.From, mh, sh, takeovers)
				}
			}
			if d.From != int64(common) {
				rt.Fatalf("stream from %d but logs agree on [0,%d)", d.From, common)
			}
			// The slave's new history followed by the master's later
			// epochs is the master's history.
			if !slices.Equal(d.History, epochsClip(mh, d.From)) || ValidateHistory(d.History) != nil {
				rt.Fatalf("history %v", d.History)
			}
		case CatchUp:
			if !masterPrefix || slavePrefix || d.From != mv.End || d.To != sv.End {
				rt.Fatalf("catch-up [%d,%d) but master %v slave %v", d.From, d.To, mlog, slog)
			}
			if ValidateHistory(d.History) != nil {
				rt.Fatalf("catch-up history %v invalid", d.History)
			}
			// The adopted history describes the slave's log.
			got := make([]int32, 0, len(slog))
			for off := range slog {
				var cur int32
				for _, e := range d.History {
					if e.StartOffset <= int64(off) {
						cur = e.Epoch
					}
				}
				got = append(got, cur)
			}
			if !slices.Equal(got, slog) {
				rt.Fatalf("catch-up history %v does not describe %v", d.History, slog)
			}
		case Fence:
			if slavePrefix || (masterPrefix && mv.End > 0) {
				rt.Fatalf("fenced (%s) though one log is a prefix of the other: master %v slave %v", d.Reason, mlog, slog)
			}
		case Refuse:
			rt.Fatalf("refused (%s) logs that share their first epoch", d.Reason)
		}
		if slavePrefix && d.Action != Stream {
			rt.Fatalf("a slave that is a prefix of the master got %v", d.Action)
		}
		// A master that is a prefix of the slave catches up from it,
		// unless a takeover it began supersedes the slave's tail: then the
		// slave streams from the master's end, as when the master has
		// written in its takeover epoch already.
		superseded := mv.LastEpoch() > sv.LastEpoch() && takeoverIn(sv.LastEpoch(), mv.LastEpoch(), takeovers)
		if masterPrefix && !slavePrefix && mv.End > 0 {
			if want := map[bool]Action{false: CatchUp, true: Stream}[superseded]; d.Action != want {
				rt.Fatalf("a master that is a prefix of the slave got %v (%s), want %v (takeover superseding the slave's tail: %v)", d.Action, d.Reason, want, superseded)
			}
		}
	})
}
