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
}

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
	for i := 0; (limit == 0 || i < limit) && !l.stop.Load(); {
		m := l.c.master.e
		if f, _ := m.host.Fenced(); f {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		r, err := m.store.Append(message("ReplP", int32(g%4), fmt.Sprintf("%s-p%d-%d", tag, g, i), fmt.Sprintf("k%d", i%7)))
		if err != nil {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		i++
		done := make(chan storehost.AckStatus, 1)
		m.host.Ack(l.c.ack, r.End(), func(st storehost.AckStatus) { done <- st })
		l.got.add(<-done, r.End())
		if limit == 0 && l.c.pol.WaitReplicas == 0 {
			time.Sleep(time.Millisecond) // acks do not wait: pace the load under a fault
		}
	}
}

// wait waits for the producers to finish their records.
func (l *load) wait() { l.wg.Wait() }

// halt stops the producers after their current record.
func (l *load) halt() {
	l.stop.Store(true)
	l.wg.Wait()
}
