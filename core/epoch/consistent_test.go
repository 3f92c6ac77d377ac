package epoch

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestFindConsistentPoint(t *testing.T) {
	h := func(es ...Entry) []Entry { return es }
	tests := []struct {
		name                string
		local               []Entry
		localEnd            int64
		remote              []Entry
		remoteEnd           int64
		want                int64
		noPoint, invalidArg bool
	}{
		{name: "both empty", want: 0},
		{name: "local empty", remote: h(Entry{1, 0}), remoteEnd: 500, want: 0},
		{name: "local empty, local log non-empty", localEnd: 0, remote: h(Entry{1, 0}), remoteEnd: 5, want: 0},
		{name: "remote empty", local: h(Entry{1, 0}), localEnd: 10, noPoint: true},
		{name: "identical", local: h(Entry{1, 0}, Entry{2, 100}), localEnd: 300,
			remote: h(Entry{1, 0}, Entry{2, 100}), remoteEnd: 300, want: 300},
		{name: "slave behind in the same epoch", local: h(Entry{1, 0}, Entry{2, 100}), localEnd: 150,
			remote: h(Entry{1, 0}, Entry{2, 100}), remoteEnd: 300, want: 150},
		{name: "slave behind by epochs", local: h(Entry{1, 0}), localEnd: 80,
			remote: h(Entry{1, 0}, Entry{2, 100}, Entry{3, 200}), remoteEnd: 300, want: 80},
		{name: "slave ahead in the same epoch (min)", local: h(Entry{1, 0}, Entry{2, 100}), localEnd: 400,
			remote: h(Entry{1, 0}, Entry{2, 100}), remoteEnd: 300, want: 300},
		{name: "old master diverged in a later epoch", local: h(Entry{1, 0}, Entry{2, 100}, Entry{3, 250}), localEnd: 400,
			remote: h(Entry{1, 0}, Entry{2, 100}, Entry{4, 200}), remoteEnd: 500, want: 200},
		{name: "old master wrote past the new master's start in the shared epoch", local: h(Entry{1, 0}, Entry{2, 100}), localEnd: 400,
			remote: h(Entry{1, 0}, Entry{2, 100}, Entry{3, 250}), remoteEnd: 500, want: 250},
		{name: "same epoch number, different start: not a match", local: h(Entry{1, 0}, Entry{2, 120}), localEnd: 400,
			remote: h(Entry{1, 0}, Entry{2, 100}), remoteEnd: 500, want: 100},
		{name: "empty epoch on the remote", local: h(Entry{1, 0}, Entry{2, 100}), localEnd: 150,
			remote: h(Entry{1, 0}, Entry{2, 100}, Entry{3, 100}), remoteEnd: 200, want: 100},
		{name: "empty epoch on the local", local: h(Entry{1, 0}, Entry{2, 100}, Entry{3, 100}), localEnd: 100,
			remote: h(Entry{1, 0}, Entry{2, 100}, Entry{3, 100}), remoteEnd: 180, want: 100},
		{name: "no common epoch", local: h(Entry{1, 0}, Entry{3, 50}), localEnd: 100,
			remote: h(Entry{2, 0}, Entry{4, 70}), remoteEnd: 90, noPoint: true},
		{name: "common epoch with different start only", local: h(Entry{1, 5}), localEnd: 100,
			remote: h(Entry{1, 0}), remoteEnd: 90, noPoint: true},
		{name: "invalid local history", local: h(Entry{2, 0}, Entry{1, 5}), localEnd: 10, invalidArg: true},
		{name: "invalid remote history", local: h(Entry{1, 0}), localEnd: 10, remote: h(Entry{1, 5}, Entry{2, 3}), remoteEnd: 10, invalidArg: true},
		{name: "local end below its last epoch", local: h(Entry{1, 0}, Entry{2, 100}), localEnd: 50,
			remote: h(Entry{1, 0}), remoteEnd: 90, invalidArg: true},
		{name: "negative end", localEnd: -1, invalidArg: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindConsistentPoint(tc.local, tc.localEnd, tc.remote, tc.remoteEnd)
			switch {
			case tc.noPoint:
				if !errors.Is(err, ErrNoConsistentPoint) {
					t.Fatalf("got %d, %v; want ErrNoConsistentPoint", got, err)
				}
			case tc.invalidArg:
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("got %d, %v; want ErrInvalid", got, err)
				}
			default:
				if err != nil || got != tc.want {
					t.Fatalf("got %d, %v; want %d", got, err, tc.want)
				}
			}
		})
	}
}

func TestNoConsistentPointErrorSummarises(t *testing.T) {
	var local, remote []Entry
	for i := int32(0); i < 20; i++ {
		local = append(local, Entry{2*i + 1, int64(i) * 10})
		remote = append(remote, Entry{2*i + 2, int64(i) * 10})
	}
	_, err := FindConsistentPoint(local, 500, remote, 600)
	if !errors.Is(err, ErrNoConsistentPoint) {
		t.Fatal(err)
	}
	msg := err.Error()
	for _, want := range []string{"1-0", "39-190", "2-0", "40-190", "12 more", "end 500", "end 600"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not mention %q", msg, want)
		}
	}
	if len(msg) > 400 {
		t.Fatalf("error is %d bytes long: %q", len(msg), msg)
	}
}

// segment is a run of records written in one epoch; n may be 0 (an empty
// epoch).
type segment struct {
	epoch int32
	n     int64
}

// build returns the history and the per-offset epochs of a log made of segs.
func build(segs []segment) (hist []Entry, log []int32) {
	for _, s := range segs {
		hist = append(hist, Entry{s.epoch, int64(len(log))})
		for i := int64(0); i < s.n; i++ {
			log = append(log, s.epoch)
		}
	}
	return hist, log
}

// TestConsistentPointProperty simulates two logs that share a prefix of
// epochs (the last shared epoch possibly longer on one side), then continue
// under different epochs (unique per side, as a controller assigns them).
// The point must be within both logs, both logs must agree on every offset
// below it, and it must be the longest such prefix. A follower that
// truncates there and adopts the leader's history then extends it exactly
// into the leader's history.
func TestConsistentPointProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nShared := rapid.IntRange(0, 5).Draw(rt, "shared")
		epoch := int32(rapid.IntRange(0, 3).Draw(rt, "firstEpoch"))
		var shared []segment
		for i := 0; i < nShared; i++ {
			shared = append(shared, segment{epoch, rapid.Int64Range(0, 5).Draw(rt, "n")})
			epoch += int32(rapid.IntRange(1, 3).Draw(rt, "gap"))
		}
		localSegs := append([]segment(nil), shared...)
		remoteSegs := append([]segment(nil), shared...)
		if nShared > 0 { // the followers of the last shared epoch hold different prefixes of it
			localSegs[nShared-1].n = rapid.Int64Range(0, 6).Draw(rt, "localLastShared")
			remoteSegs[nShared-1].n = rapid.Int64Range(0, 6).Draw(rt, "remoteLastShared")
		}
		// Later epochs: each is won by one side; both sides' numbers rise.
		for i, n := 0, rapid.IntRange(0, 6).Draw(rt, "later"); i < n; i++ {
			s := segment{epoch, rapid.Int64Range(0, 5).Draw(rt, "n")}
			if rapid.Bool().Draw(rt, "localWins") {
				localSegs = append(localSegs, s)
			} else {
				remoteSegs = append(remoteSegs, s)
			}
			epoch += int32(rapid.IntRange(1, 3).Draw(rt, "gap"))
		}
		local, localLog := build(localSegs)
		remote, remoteLog := build(remoteSegs)
		localEnd, remoteEnd := int64(len(localLog)), int64(len(remoteLog))

		p, err := FindConsistentPoint(local, localEnd, remote, remoteEnd)
		if len(local) == 0 {
			if err != nil || p != 0 {
				rt.Fatalf("empty local: got %d, %v", p, err)
			}
			return
		}
		if nShared == 0 {
			if !errors.Is(err, ErrNoConsistentPoint) {
				rt.Fatalf("no shared epoch: got %d, %v", p, err)
			}
			return
		}
		if err != nil {
			rt.Fatalf("local %v end %d, remote %v end %d: %v", local, localEnd, remote, remoteEnd, err)
		}
		if p < 0 || p > localEnd || p > remoteEnd {
			rt.Fatalf("point %d outside the logs (%d, %d)", p, localEnd, remoteEnd)
		}
		common := int64(0)
		for common < localEnd && common < remoteEnd && localLog[common] == remoteLog[common] {
			common++
		}
		if p != common {
			rt.Fatalf("local %v end %d, remote %v end %d: point %d, but the logs agree on exactly [0,%d)",
				local, localEnd, remote, remoteEnd, p, common)
		}

		// Follower side: truncate, adopt the leader's history up to the
		// point, then receive the leader's later epochs in order.
		follower := Clip(remote, p)
		for _, e := range remote[len(follower):] {
			next := append(follower, e)
			if err := Validate(next); err != nil {
				rt.Fatalf("leader epoch %v does not follow %v: %v", e, follower, err)
			}
			follower = next
		}
		if !reflect.DeepEqual(follower, remote) {
			rt.Fatalf("follower history %v, leader %v", follower, remote)
		}
	})
}

// TestReturningOldMaster walks the split-brain case through a History: the
// old master wrote epoch 3 alone while the new master still wrote in epoch
// 2; after finding the point, the old master adopts the leader's view and
// can then append the leader's later epochs, which TruncateSuffix alone
// would not allow (its own epoch 3 would block epoch 2's records).
func TestReturningOldMaster(t *testing.T) {
	h, _ := openTemp(t)
	if err := h.Reset([]Entry{{1, 0}, {2, 50}, {3, 100}}); err != nil {
		t.Fatal(err)
	}
	leader := []Entry{{1, 0}, {2, 50}, {4, 180}}
	p, err := FindConsistentPoint(h.Entries(), 150, leader, 300)
	if err != nil || p != 100 {
		t.Fatalf("point %d, %v; want 100", p, err)
	}
	if err := h.Reset(Clip(leader, p)); err != nil {
		t.Fatal(err)
	}
	if e, _ := h.EpochAt(p); e.Epoch != 2 {
		t.Fatalf("offset %d should now belong to epoch 2, got %v", p, e)
	}
	if err := h.Append(Entry{4, 180}); err != nil {
		t.Fatal(err)
	}
	if got := h.Entries(); !reflect.DeepEqual(got, leader) {
		t.Fatalf("history %v, want the leader's %v", got, leader)
	}
}

func ExampleFindConsistentPoint() {
	// The returning old master (local) wrote up to 400 in epoch 3, which
	// the new master never saw; the new master began epoch 4 at 200.
	local := []Entry{{1, 0}, {2, 100}, {3, 250}}
	remote := []Entry{{1, 0}, {2, 100}, {4, 200}}
	p, err := FindConsistentPoint(local, 400, remote, 500)
	fmt.Println(p, err)
	// Output: 200 <nil>
}
