package schedule

import (
	"math/rand"
	"testing"
	"time"
)

// TestCommitterModel confirms additions in random order and checks the
// committed offset against a model: the end of the longest confirmed
// prefix, set only when it grows.
func TestCommitterModel(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	for trial := range 200 {
		var sets []int64
		c := newCommitter(func(next int64) { sets = append(sets, next) })
		var ends []int64
		var seqs []uint64
		off := int64(0)
		confirmed := map[int]bool{}
		for range rng.Intn(40) + 1 {
			off += int64(rng.Intn(3)) // skips of 0 happen: an empty step
			ends = append(ends, off)
			seqs = append(seqs, c.add(off))
		}
		for _, i := range rng.Perm(len(seqs)) {
			if rng.Intn(5) == 0 {
				c.confirm(seqs[i]) // twice: no effect
			}
			c.confirm(seqs[i])
			confirmed[i] = true
			prefix := 0
			for prefix < len(ends) && confirmed[prefix] {
				prefix++
			}
			want := int64(-1)
			if prefix > 0 {
				want = ends[prefix-1]
			}
			if c.done != want {
				t.Fatalf("seed %d trial %d: committed %d, want %d", seed, trial, c.done, want)
			}
		}
		for i := 1; i < len(sets); i++ {
			if sets[i] <= sets[i-1] {
				t.Fatalf("seed %d trial %d: set %v does not increase", seed, trial, sets)
			}
		}
		if !c.idle() {
			t.Fatalf("seed %d trial %d: not idle after every confirm", seed, trial)
		}
	}
}
