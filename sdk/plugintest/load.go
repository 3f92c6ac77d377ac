package plugintest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/sdk/storehost"
)

// acks is what producers' acknowledgements answered, as the host's rule
// (storehost.Host.Ack) gives them: SLAVE_NOT_AVAILABLE at once when too
// few replicas are in sync, FLUSH_SLAVE_TIMEOUT after the policy's
// timeout, SEND_OK once AckedOffset covers the record.
type acks struct {
	mu     sync.Mutex
	ok     []int64 // ends of the records acknowledged SEND_OK
	counts map[storehost.AckStatus]int
}

func (a *acks) add(st storehost.AckStatus, end int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.counts == nil {
		a.counts = map[storehost.AckStatus]int{}
	}
	a.counts[st]++
	if st == storehost.AckOK {
		a.ok = append(a.ok, end)
	}
}

func (a *acks) count(st storehost.AckStatus) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[st]
}

func (a *acks) okEnds() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int64(nil), a.ok...)
}

func (a *acks) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	for st, n := range a.counts {
		parts = append(parts, fmt.Sprintf("%s %d", st, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// load is producers appending on the master, each waiting for its
// record's acknowledgement before its next append, as a synchronous
// producer does. They skip appends while the master is fenced.
type load struct {
	c    *cluster
	stop atomic.Bool
	wg   sync.WaitGroup
	got  *acks

	mu    sync.Mutex
	stuck string // why a producer gave up, "" when none did
}

// stuckAfter is how long a producer keeps retrying a master that refuses
// its appends (fenced, or Append failing) before it gives up and the
// phase fails with the reason: a master that stays fenced is a failure
// of the plugin under test, never a reason for the suite to hang.
const stuckAfter = 2 * syncWithin

// startLoad starts the cluster's producers; each appends at most
// perProducer records (0: until stopped).
func (c *cluster) startLoad(tag string, perProducer int, into *acks) *load {
	l := &load{c: c, got: into}
	for g := 0; g < c.o.producers; g++ {
		l.wg.Add(1)
		go l.producer(tag, g, perProducer)
	}
	return l
}

func (l *load) producer(tag string, g, limit int) {
	defer l.wg.Done()
	var refusedSince time.Time
	refused := func(why string) bool {
		if refusedSince.IsZero() {
			refusedSince = time.Now()
		} else if time.Since(refusedSince) > stuckAfter {
			l.giveUp(fmt.Sprintf("producer %d: the master refused appends for %v: %s", g, stuckAfter, why))
			return false
		}
		time.Sleep(2 * time.Millisecond)
		return true
	}
	for i := 0; (limit == 0 || i < limit) && !l.stop.Load(); {
		m := l.c.master.e
		if f, why := m.host.Fenced(); f {
			if !refused("fenced: " + why) {
				return
			}
			continue
		}
		r, err := m.store.Append(message("ReplP", int32(g%4), fmt.Sprintf("%s-p%d-%d", tag, g, i), fmt.Sprintf("k%d", i%7)))
		if err != nil {
			if !refused("append: " + err.Error()) {
				return
			}
			continue
		}
		refusedSince = time.Time{}
		i++
		done := make(chan storehost.AckStatus, 1)
		m.host.Ack(l.c.ack, r.End(), func(st storehost.AckStatus) { done <- st })
		l.got.add(<-done, r.End())
		if limit == 0 && l.c.pol.WaitReplicas == 0 {
			time.Sleep(time.Millisecond) // acks do not wait: pace the load under a fault
		}
	}
}

func (l *load) giveUp(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stuck == "" {
		l.stuck = why
	}
}

// wait waits for the producers to finish their records (or give up);
// it returns why one gave up, "" when none did.
func (l *load) wait() string {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stuck
}

// halt stops the producers after their current record; it returns why
// one gave up before, "" when none did.
func (l *load) halt() string {
	l.stop.Store(true)
	return l.wait()
}
