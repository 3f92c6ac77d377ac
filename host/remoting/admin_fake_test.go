package remoting

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"

	"github.com/keelmq/keel/core/meta"
)

// The fake's AdminBackend: topics live in fakeBackend.topics, offsets in
// fakeBackend.offsets (keyed group@topic/queue); the group table, the
// tables' versions and the refusal switch live in a side table keyed by the
// fake, so fakeBackend's own file stays as it is.

type fakeAdmin struct {
	groups      map[string]meta.SubscriptionGroupConfig
	topicsVer   meta.DataVersion
	groupsVer   meta.DataVersion
	refuse      error // returned by every changing method when set
	runtimeInfo map[string]string
}

var fakeAdmins sync.Map // *fakeBackend → *fakeAdmin

// admin returns f's admin state; the caller holds f.mu.
func (f *fakeBackend) admin() *fakeAdmin {
	a, _ := fakeAdmins.LoadOrStore(f, &fakeAdmin{groups: map[string]meta.SubscriptionGroupConfig{}})
	return a.(*fakeAdmin)
}

func (f *fakeBackend) TopicSnapshot() meta.TopicsSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return meta.TopicsSnapshot{DataVersion: f.admin().topicsVer, Topics: maps.Clone(f.topics)}
}

func (f *fakeBackend) PutTopic(t meta.TopicConfig) error {
	if t.TopicFilterType == "" {
		t.TopicFilterType = meta.FilterSingleTag
	}
	if err := t.Validate(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.admin()
	if a.refuse != nil {
		return a.refuse
	}
	f.topics[t.TopicName] = t
	a.topicsVer = a.topicsVer.Next()
	return nil
}

func (f *fakeBackend) DeleteTopic(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.admin()
	if a.refuse != nil {
		return false, a.refuse
	}
	_, ok := f.topics[name]
	delete(f.topics, name)
	for k := range f.offsets {
		if _, topic, _, ok := splitFakeOffsetKey(k); ok && topic == name {
			delete(f.offsets, k)
		}
	}
	if ok {
		a.topicsVer = a.topicsVer.Next()
	}
	return ok, nil
}

func (f *fakeBackend) SubscriptionGroupSnapshot() meta.SubscriptionGroupsSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.admin()
	return meta.SubscriptionGroupsSnapshot{DataVersion: a.groupsVer, Groups: maps.Clone(a.groups)}
}

func (f *fakeBackend) PutSubscriptionGroup(c meta.SubscriptionGroupConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.admin()
	if a.refuse != nil {
		return a.refuse
	}
	a.groups[c.GroupName] = c
	a.groupsVer = a.groupsVer.Next()
	return nil
}

func (f *fakeBackend) DeleteSubscriptionGroup(name string, cleanOffsets bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.admin()
	if a.refuse != nil {
		return false, a.refuse
	}
	_, ok := a.groups[name]
	delete(a.groups, name)
	if cleanOffsets {
		for k := range f.offsets {
			if g, _, _, ok := splitFakeOffsetKey(k); ok && g == name {
				delete(f.offsets, k)
			}
		}
	}
	return ok, nil
}

func (f *fakeBackend) ConsumerOffsetSnapshot() meta.OffsetsSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]map[int32]int64{}
	for k, off := range f.offsets {
		g, topic, q, ok := splitFakeOffsetKey(k)
		if !ok {
			continue
		}
		key := meta.OffsetKey(topic, g)
		if out[key] == nil {
			out[key] = map[int32]int64{}
		}
		out[key][q] = off
	}
	return meta.OffsetsSnapshot{Offsets: out}
}

func (f *fakeBackend) RuntimeInfo() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.admin().runtimeInfo)
}

// setAdminRefusal makes every changing admin method fail with err.
func (f *fakeBackend) setAdminRefusal(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admin().refuse = err
}

// splitFakeOffsetKey splits the fake's group@topic/queue key.
func splitFakeOffsetKey(k string) (group, topic string, q int32, ok bool) {
	group, rest, ok := strings.Cut(k, "@")
	slash := strings.LastIndexByte(rest, '/')
	if !ok || slash < 0 {
		return "", "", 0, false
	}
	n, err := strconv.ParseInt(rest[slash+1:], 10, 32)
	if err != nil {
		panic(fmt.Sprintf("fake offset key %q: %v", k, err))
	}
	return group, rest[:slash], int32(n), true
}
