package remoting

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/keelmq/keel/core/record"
)

// fakeBackend is an in-memory Backend: a commitlog byte slice, per-queue
// entry lists and a per-queue broadcast channel for long polling.
type fakeBackend struct {
	mu      sync.Mutex
	log     []byte
	queues  map[string][]fakeEntry // key topic/queue
	minOff  map[string]int64       // simulated retention: entries below are gone
	wake    map[string]chan struct{}
	topics  map[string]TopicInfo
	offsets map[string]int64
	maxBody int
	maxRec  map[string]int

	appendErr error     // returned by Append when set
	ackStatus AckStatus // returned by AwaitAck
	ackGate   chan struct{}
	// ackMode chooses how a send's ack is answered: ackInline (AckNow
	// when no gate is set), ackCallback (AckNow declines, AckAsync
	// answers) or ackGoroutine (both decline: AwaitAck on req.Go).
	ackMode  int
	indexOff bool
	appends  int
	// access is what ReadAccess answers; getErr, when set, is returned
	// by GetMessages and readErr by ReadMessage.
	access  ReadAccess
	getErr  error
	readErr error
}

// setAccess changes what ReadAccess answers.
func (f *fakeBackend) setAccess(a ReadAccess) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.access = a
}

func (f *fakeBackend) ReadAccess() ReadAccess {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.access
}

func (f *fakeBackend) RaiseConsumerOffset(group, topic string, q int32, off int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := group + "@" + qkey(topic, q)
	if cur, ok := f.offsets[k]; !ok || off > cur {
		f.offsets[k] = off
	}
	return nil
}

type fakeEntry struct {
	phys    int64
	size    int32
	tags    int64
	storeTS int64
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		queues:  map[string][]fakeEntry{},
		minOff:  map[string]int64{},
		wake:    map[string]chan struct{}{},
		topics:  map[string]TopicInfo{},
		offsets: map[string]int64{},
		maxRec:  map[string]int{},
		maxBody: 1 << 20,
	}
}

func qkey(topic string, q int32) string { return fmt.Sprintf("%s/%d", topic, q) }

func (f *fakeBackend) Topic(name string) (TopicInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[name]
	return t, ok
}

func (f *fakeBackend) CreateTopic(t TopicInfo) (TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.topics[t.Name]; ok {
		return old, nil
	}
	f.topics[t.Name] = t
	return t, nil
}

func (f *fakeBackend) MaxMessageSize() int { return f.maxBody }

func (f *fakeBackend) Append(ctx context.Context, msgs []*record.Message) ([]Appended, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.appendErr != nil {
		return nil, f.appendErr
	}
	var out []Appended
	var encoded [][]byte
	for _, m := range msgs {
		b, err := record.Encode(nil, m, record.Limits{MaxMessageSize: f.maxBody})
		if err != nil {
			return nil, fmt.Errorf("fake append: %w", err)
		}
		encoded = append(encoded, b)
	}
	f.appends++
	for i, m := range msgs {
		k := qkey(m.Topic, m.QueueID)
		b := encoded[i]
		phys := int64(len(f.log))
		qo := int64(len(f.queues[k]))
		ts := time.Now().UnixMilli()
		record.Stamp(b, qo, phys, ts)
		f.log = append(f.log, b...)
		tags, _ := record.GetProperty(m.Properties, record.PropertyTags)
		f.queues[k] = append(f.queues[k], fakeEntry{phys: phys, size: int32(len(b)), tags: record.TagsHashCode(tags), storeTS: ts})
		out = append(out, Appended{PhysOffset: phys, QueueOffset: qo, Size: int32(len(b))})
		if ch := f.wake[k]; ch != nil {
			close(ch)
			delete(f.wake, k)
		}
	}
	return out, nil
}

func (f *fakeBackend) AwaitAck(ctx context.Context, end int64) AckStatus {
	f.mu.Lock()
	gate, st := f.ackGate, f.ackStatus
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	return st
}

const (
	ackInline = iota
	ackCallback
	ackGoroutine
)

func (f *fakeBackend) AckNow(end int64) (AckStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ackGate != nil || f.ackMode != ackInline {
		return 0, false
	}
	return f.ackStatus, true
}

// AckAsync answers unless ackMode is ackGoroutine; with a gate, from a
// goroutine once the gate opens (as a flusher would).
func (f *fakeBackend) AckAsync(end int64, done func(AckStatus)) bool {
	f.mu.Lock()
	gate, st, mode := f.ackGate, f.ackStatus, f.ackMode
	f.mu.Unlock()
	if mode == ackGoroutine {
		return false
	}
	if gate == nil {
		done(st)
		return true
	}
	go func() {
		<-gate
		done(st)
	}()
	return true
}

func (f *fakeBackend) bounds(k string) (lo, hi int64) {
	return f.minOff[k], int64(len(f.queues[k]))
}

func (f *fakeBackend) GetMessages(ctx context.Context, topic string, q int32, offset int64, maxCount, maxBytes int, filter func(int64) bool) (PullResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return PullResult{}, f.getErr
	}
	k := qkey(topic, q)
	ents, exists := f.queues[k]
	if !exists {
		return PullResult{Status: PullNoMatchedLogicQueue}, nil
	}
	lo, hi := f.bounds(k)
	res := PullResult{MinOffset: lo, MaxOffset: hi}
	switch {
	case lo == hi:
		res.Status, res.NextOffset = PullNoMessageInQueue, hi
		return res, nil
	case offset < lo:
		res.Status, res.NextOffset = PullOffsetTooSmall, lo
		return res, nil
	case offset == hi:
		res.Status, res.NextOffset = PullOffsetOverflowOne, offset
		return res, nil
	case offset > hi:
		res.Status, res.NextOffset = PullOffsetOverflowBadly, hi
		return res, nil
	}
	next := offset
	for i := offset; i < hi && res.Count < maxCount; i++ {
		next = i + 1
		e := ents[i]
		if filter != nil && !filter(e.tags) {
			continue
		}
		if res.Count > 0 && len(res.Data)+int(e.size) > maxBytes {
			next = i
			break
		}
		res.Data = append(res.Data, f.log[e.phys:e.phys+int64(e.size)]...)
		res.Count++
	}
	res.NextOffset = next
	if res.Count > 0 {
		res.Status = PullFound
	} else {
		res.Status = PullNoMatchedMessage
	}
	return res, nil
}

func (f *fakeBackend) WaitForData(ctx context.Context, topic string, q int32, offset int64) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := qkey(topic, q)
	if int64(len(f.queues[k])) > offset {
		c := make(chan struct{})
		close(c)
		return c
	}
	ch := f.wake[k]
	if ch == nil {
		ch = make(chan struct{})
		f.wake[k] = ch
	}
	return ch
}

func (f *fakeBackend) QueueOffsets(topic string, q int32) (int64, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bounds(qkey(topic, q))
}

func (f *fakeBackend) OffsetByTime(ctx context.Context, topic string, q int32, ts int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := qkey(topic, q)
	ents := f.queues[k]
	for i := f.minOff[k]; i < int64(len(ents)); i++ {
		if ents[i].storeTS >= ts {
			return i, nil
		}
	}
	return int64(len(ents)), nil
}

func (f *fakeBackend) ReadMessage(ctx context.Context, phys int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, f.readErr
	}
	for _, ents := range f.queues {
		for _, e := range ents {
			if e.phys == phys {
				return append([]byte(nil), f.log[phys:phys+int64(e.size)]...), nil
			}
		}
	}
	return nil, fmt.Errorf("no record at %d: %w", phys, ErrNotFound)
}

func (f *fakeBackend) QueryMessages(ctx context.Context, topic, key string, maxNum int, begin, end int64) (QueryResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.indexOff {
		return QueryResult{}, fmt.Errorf("no index plugin loaded: %w", ErrNotSupported)
	}
	var qr QueryResult
	for _, e := range f.queues[qkey(topic, 0)] {
		rec, err := record.Decode(f.log[e.phys:])
		if err != nil {
			return qr, err
		}
		if k, _ := record.GetProperty(rec.Properties, record.PropertyKeys); k == key && len(qr.Records) < maxNum {
			qr.Records = append(qr.Records, f.log[e.phys:e.phys+int64(e.size)])
		}
	}
	return qr, nil
}

func (f *fakeBackend) ConsumerOffset(group, topic string, q int32) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.offsets[group+"@"+qkey(topic, q)]
	return o, ok
}

func (f *fakeBackend) CommitConsumerOffset(group, topic string, q int32, off int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offsets[group+"@"+qkey(topic, q)] = off
	return nil
}

func (f *fakeBackend) MaxReconsumeTimes(group string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.maxRec[group]; ok {
		return n
	}
	return DefaultMaxReconsumeTimes
}

// fakeRoutes is a RouteSource over a fakeBackend's topic table.
type fakeRoutes struct {
	*fakeBackend
	id BrokerIdentity
}

func (r fakeRoutes) Identity() BrokerIdentity { return r.id }
