package core

import (
	"testing"
)

func TestOffsetWaitersReleaseOnlyReached(t *testing.T) {
	var ws offsetWaiters
	a, b, c := ws.add(100), ws.add(50), ws.add(200)
	ws.release(120)
	for _, w := range []*offsetWaiter{a, b} {
		select {
		case <-w.ch:
		default:
			t.Fatalf("waiter at %d not released at 120", w.off)
		}
	}
	select {
	case <-c.ch:
		t.Fatal("waiter at 200 released at 120")
	default:
	}
	d := ws.add(150)
	ws.remove(d)
	ws.release(1000)
	<-c.ch
	select {
	case <-d.ch:
		t.Fatal("removed waiter released")
	default:
	}
	if len(ws.h) != 0 {
		t.Fatalf("%d waiters left", len(ws.h))
	}
	e := ws.add(5000)
	ws.releaseAll()
	<-e.ch
}
