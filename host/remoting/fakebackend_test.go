package remoting

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/meta"
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
	topics  map[string]meta.TopicConfig
	offsets map[string]int64
	maxBody int
	maxRec  map[string]int

	appendErr error     // returned by Append when set
	ackStatus AckStatus // the acknowledgement's answer
	ackGate   chan struct{}
	// ackMode chooses how a send's ack is answered: ackInline (AckNow
	// when no gate is set) or ackCallback (AckNow declines, AckAsync
	// answers).
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
		topics:  map[string]meta.TopicConfig{},
		offsets: map[string]int64{},
		maxRec:  map[string]int{},
		maxBody: 1 << 20,
	}
}

func qkey(topic string, q int32) string { return fmt.Sprintf("%s/%d", topic, q) }

func (f *fakeBackend) Topic(name string) (meta.TopicConfig, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[name]
	return t, ok
}

func (f *fakeBackend) CreateTopic(t meta.TopicConfig) (meta.TopicConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.topics[t.TopicName]; ok {
		return old, nil
	}
	f.topics[t.TopicName] = t
	return t, nil
}

func (f *fakeBackend) MaxMessageSize() int { return f.maxBody }

func (f *fakeBackend) Append(ctx context.Context, msgs []*record.Message) ([]core.AppendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.appendErr != nil {
		return nil, f.appendErr
	}
	var out []core.AppendResult
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
		out = append(out, core.AppendResult{PhysOffset: phys, QueueOffset: qo, Size: int32(len(b)), StoreTimestamp: ts})
		if ch := f.wake[k]; ch != nil {
			close(ch)
			delete(f.wake, k)
		}
	}
	return out, nil
}

const (
	ackInline = iota
	ackCallback
)

func (f *fakeBackend) AckNow(end int64) (AckStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ackGate != nil || f.ackMode != ackInline {
		return 0, false
	}
	return f.ackStatus, true
}

// AckAsync answers at once, or with a gate, from a goroutine once the gate
// opens (as a flusher would).
func (f *fakeBackend) AckAsync(end int64, done func(AckStatus)) {
	f.mu.Lock()
	gate, st := f.ackGate, f.ackStatus
	f.mu.Unlock()
	if gate == nil {
		done(st)
		return
	}
	go func() {
		<-gate
		done(st)
	}()
}

func (f *fakeBackend) bounds(k string) (lo, hi int64) {
	return f.minOff[k], int64(len(f.queues[k]))
}

// GetMessages follows the Backend contract as the host does, with a
// complete queue except on a Trailing node, where an answer past the end
// is core.NotYetVisible.
func (f *fakeBackend) GetMessages(ctx context.Context, topic string, q int32, offset int64, maxCount, maxBytes int, filter func(int64) bool) (core.GetResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return core.GetResult{}, f.getErr
	}
	res := f.read(topic, q, offset, maxCount, maxBytes, filter)
	if f.access.Trailing {
		switch {
		case res.Status == core.OffsetOverflowBadly,
			(res.Status == core.NoMatchedLogicQueue || res.Status == core.NoMessageInQueue) && offset > res.NextOffset:
			return core.GetResult{Status: core.NotYetVisible, NextOffset: offset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset}, nil
		}
	}
	return res, nil
}

func (f *fakeBackend) read(topic string, q int32, offset int64, maxCount, maxBytes int, filter func(int64) bool) core.GetResult {
	k := qkey(topic, q)
	ents, exists := f.queues[k]
	if !exists {
		return core.GetResult{Status: core.NoMatchedLogicQueue}
	}
	lo, hi := f.bounds(k)
	res := core.GetResult{MinOffset: lo, MaxOffset: hi}
	switch {
	case lo == hi:
		res.Status, res.NextOffset = core.NoMessageInQueue, hi
		return res
	case offset < lo:
		res.Status, res.NextOffset = core.OffsetTooSmall, lo
		return res
	case offset == hi:
		res.Status, res.NextOffset = core.OffsetOverflowOne, offset
		return res
	case offset > hi:
		res.Status, res.NextOffset = core.OffsetOverflowBadly, hi
		return res
	}
	next := offset
	for i := offset; i < hi && len(res.Sizes) < maxCount; i++ {
		next = i + 1
		e := ents[i]
		if filter != nil && !filter(e.tags) {
			continue
		}
		if len(res.Sizes) > 0 && len(res.Data)+int(e.size) > maxBytes {
			next = i
			break
		}
		res.Data = append(res.Data, f.log[e.phys:e.phys+int64(e.size)]...)
		res.Sizes = append(res.Sizes, e.size)
	}
	res.NextOffset = next
	if len(res.Sizes) > 0 {
		res.Status = core.Found
	} else {
		res.Status = core.NoMatchedMessage
	}
	return res
}

// WaitForData hands out one broadcast channel per queue, closed and
// dropped by the next Append to it; stop has nothing to release.
func (f *fakeBackend) WaitForData(topic string, q int32, offset int64) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := qkey(topic, q)
	if int64(len(f.queues[k])) > offset {
		c := make(chan struct{})
		close(c)
		return c, func() {}
	}
	ch := f.wake[k]
	if ch == nil {
		ch = make(chan struct{})
		f.wake[k] = ch
	}
	return ch, func() {}
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
