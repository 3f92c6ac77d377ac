package timer

import (
	"log/slog"
	"math/rand"
	"testing"
)

// TestIndexModel checks the index against a model: random schedules,
// walks of due ticks, checkpoints and restarts (clean, and crashes that
// lose everything since the last checkpoint). Every timer is handed out
// by a walk once per durable delivery, never in a tick before its due
// time's, and none is lost; after a crash, the timers added since the
// checkpoint are added again (the queue offset went back) and timers of
// ticks walked but not marked delivered are walked again.
func TestIndexModel(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		runIndexModel(t, seed)
	}
}

func runIndexModel(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	const prec, slots = 10, 64 // ms, slots: max delay 31 ticks
	log := slog.New(slog.DiscardHandler)
	ix, fresh, err := openIndex(dir, prec, slots, log)
	if err != nil || !fresh {
		t.Fatalf("open: fresh %v, %v", fresh, err)
	}
	ix.reset(0, 0, 0)
	if err := ix.save(); err != nil {
		t.Fatal(err)
	}
	// The "commitlog": timer i is due at dues[i]; queue offset = i.
	var dues []int64
	delivered := map[int64]int{}    // timer → durable deliveries
	walkedSince := map[int64]bool{} // delivered after the last save (may repeat)
	now := int64(0)                 // current tick
	for step := 0; step < 400; step++ {
		switch op := rng.Intn(10); {
		case op < 5: // send some timers
			for k := rng.Intn(20); k > 0; k-- {
				due := (now+int64(rng.Intn(30)))*prec + int64(rng.Intn(prec))
				dues = append(dues, due)
			}
		case op < 8: // time passes: walk due ticks
			now += int64(rng.Intn(4))
		case op == 8:
			if err := ix.save(); err != nil {
				t.Fatal(err)
			}
			clear(walkedSince)
		default: // restart: clean (save first) or crash
			if rng.Intn(2) == 0 {
				if err := ix.save(); err != nil {
					t.Fatal(err)
				}
				clear(walkedSince)
			} else {
				for id := range walkedSince {
					delivered[id]-- // lost with the crash: to be walked again
				}
				clear(walkedSince)
			}
			ix.close()
			if ix, fresh, err = openIndex(dir, prec, slots, log); err != nil || fresh {
				t.Fatalf("seed %d: reopen: fresh %v, %v", seed, fresh, err)
			}
		}
		// Index what was sent (the enqueue loop).
		for q := ix.state().QueueOffset; q < int64(len(dues)); q++ {
			if err := ix.add(dues[q], q, 1, q); err != nil {
				t.Fatalf("seed %d: add %d: %v", seed, q, err)
			}
		}
		// Deliver the ticks up to now (the delivery loop).
		for tick := ix.state().ReadTick; tick <= now; tick++ {
			pos, _, err := ix.beginWalk(tick)
			if err != nil {
				t.Fatal(err)
			}
			for pos >= 0 {
				u, err := ix.unitAt(pos)
				if err != nil {
					t.Fatalf("seed %d: tick %d: %v", seed, tick, err)
				}
				if floorDiv(u.due, prec) > tick {
					t.Fatalf("seed %d: timer %d due %d walked early, in tick %d", seed, u.phys, u.due, tick)
				}
				if u.due != dues[u.phys] {
					t.Fatalf("seed %d: unit of timer %d has due %d, want %d", seed, u.phys, u.due, dues[u.phys])
				}
				delivered[u.phys]++
				walkedSince[u.phys] = true
				pos = u.prev
			}
			ix.delivered(tick + 1)
		}
		for id, n := range delivered {
			if n > 1 {
				t.Fatalf("seed %d: timer %d delivered %d times", seed, id, n)
			}
		}
	}
	for id, due := range dues {
		if floorDiv(due, prec) < now && delivered[int64(id)] != 1 {
			t.Fatalf("seed %d: timer %d due %d (tick %d, now %d) delivered %d times", seed, id, due, floorDiv(due, prec), now, delivered[int64(id)])
		}
	}
	ix.close()
}
