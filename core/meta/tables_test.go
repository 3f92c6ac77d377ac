package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/keelmq/keel/core/vfs"
	"pgregory.net/rapid"
)

func topic(name string, q int32) TopicConfig {
	return TopicConfig{TopicName: name, ReadQueueNums: q, WriteQueueNums: q, Perm: PermRead | PermWrite, TopicFilterType: FilterSingleTag}
}

func TestTopicValidation(t *testing.T) {
	ok := topic("Topic_A-1%x|y", 8)
	tests := []struct {
		name string
		mut  func(*TopicConfig)
		bad  bool
	}{
		{"valid", func(*TopicConfig) {}, false},
		{"max length", func(c *TopicConfig) { c.TopicName = strings.Repeat("a", MaxTopicNameLen) }, false},
		{"too long", func(c *TopicConfig) { c.TopicName = strings.Repeat("a", MaxTopicNameLen+1) }, true},
		{"empty name", func(c *TopicConfig) { c.TopicName = "" }, true},
		{"dot", func(c *TopicConfig) { c.TopicName = "a.b" }, true},
		{"at sign", func(c *TopicConfig) { c.TopicName = "a@b" }, true},
		{"space", func(c *TopicConfig) { c.TopicName = "a b" }, true},
		{"slash", func(c *TopicConfig) { c.TopicName = "a/b" }, true},
		{"non-ascii", func(c *TopicConfig) { c.TopicName = "héllo" }, true},
		{"zero read queues", func(c *TopicConfig) { c.ReadQueueNums = 0 }, true},
		{"zero write queues", func(c *TopicConfig) { c.WriteQueueNums = 0 }, true},
		{"1024 queues", func(c *TopicConfig) { c.ReadQueueNums, c.WriteQueueNums = 1024, 1024 }, false},
		{"1025 queues", func(c *TopicConfig) { c.WriteQueueNums = 1025 }, true},
		{"perm 7", func(c *TopicConfig) { c.Perm = 7 }, false},
		{"perm 8", func(c *TopicConfig) { c.Perm = 8 }, true},
		{"multi tag", func(c *TopicConfig) { c.TopicFilterType = FilterMultiTag }, false},
		{"unknown filter", func(c *TopicConfig) { c.TopicFilterType = "SQL" }, true},
	}
	tp, err := OpenTopics(vfs.OS, filepath.Join(t.TempDir(), TopicsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mut(&c)
			err := tp.Put(c)
			if tc.bad != (err != nil) {
				t.Fatalf("Put(%+v) = %v, want error: %v", c, err, tc.bad)
			}
			if tc.bad && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			got, found := tp.Get(c.TopicName)
			if stored := found && got == c; stored == tc.bad {
				t.Fatalf("Get after Put = %+v, %v", got, found)
			}
		})
	}
}

func TestTopicsCRUDAndVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), TopicsFile)
	tp, err := OpenTopics(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	v0 := tp.Version()
	if err := tp.Put(TopicConfig{TopicName: "b", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	c, ok := tp.Get("b")
	if !ok || c.TopicFilterType != FilterSingleTag || !c.Readable() || !c.Writable() {
		t.Fatalf("Get(b) = %+v, %v", c, ok)
	}
	v1 := tp.Version()
	if v1.Equal(v0) || v1.Counter != v0.Counter+1 {
		t.Fatalf("version did not advance: %v -> %v", v0, v1)
	}
	if err := tp.Put(c); err != nil { // identical: no change
		t.Fatal(err)
	}
	if !tp.Version().Equal(v1) {
		t.Fatal("identical Put advanced the version")
	}
	c2, created, err := tp.GetOrCreate("a", 8)
	if err != nil || !created || c2.ReadQueueNums != 8 || c2.WriteQueueNums != 8 || c2.Perm != PermRead|PermWrite {
		t.Fatalf("GetOrCreate(a) = %+v, %v, %v", c2, created, err)
	}
	if _, created, _ := tp.GetOrCreate("a", 2); created {
		t.Fatal("GetOrCreate created an existing topic")
	}
	if _, _, err := tp.GetOrCreate("bad name", 8); !errors.Is(err, ErrInvalid) {
		t.Fatalf("GetOrCreate with a bad name: %v", err)
	}
	if _, _, err := tp.GetOrCreate("c", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("GetOrCreate with 0 queues: %v", err)
	}
	if got := tp.List(); len(got) != 2 || got[0].TopicName != "a" || got[1].TopicName != "b" {
		t.Fatalf("List = %+v", got)
	}
	v2 := tp.Version()
	if ok, err := tp.Delete("b"); !ok || err != nil {
		t.Fatalf("Delete(b) = %v, %v", ok, err)
	}
	if ok, _ := tp.Delete("b"); ok {
		t.Fatal("Delete reported wrong existence")
	}
	if tp.Version().Counter != v2.Counter+1 {
		t.Fatal("Delete did not advance the version once")
	}

	// Persist and reopen.
	if err := tp.Persist(); err != nil {
		t.Fatal(err)
	}
	tp2, err := OpenTopics(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tp2.Snapshot(), tp.Snapshot()) {
		t.Fatalf("reloaded %+v, want %+v", tp2.Snapshot(), tp.Snapshot())
	}
	if tp2.Dirty() {
		t.Fatal("freshly loaded table is dirty")
	}
}

// TestPersistOnlyWhenDirty removes the file behind a clean table and checks
// Persist does not write it again, then makes it dirty and checks it does.
func TestPersistOnlyWhenDirty(t *testing.T) {
	path := filepath.Join(t.TempDir(), DelayOffsetsFile)
	d, err := OpenDelayOffsets(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Dirty() {
		t.Fatal("new table is dirty")
	}
	if err := d.Persist(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatal("Persist of a clean table wrote a file")
	}
	if err := d.Set(3, 10); err != nil {
		t.Fatal(err)
	}
	if !d.Dirty() {
		t.Fatal("Set did not make the table dirty")
	}
	if err := d.Persist(); err != nil {
		t.Fatal(err)
	}
	if d.Dirty() {
		t.Fatal("Persist did not clean the table")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := d.Persist(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatal("second Persist of a clean table wrote a file")
	}
}

// TestPersistFailureKeepsDirty checks that a failed write leaves the table
// dirty so the next Persist retries.
func TestPersistFailureKeepsDirty(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{FS: vfs.OS, failAt: 3} // fail the temp file's sync
	o, err := OpenConsumerOffsets(ffs, filepath.Join(dir, ConsumerOffsetsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Commit("g", "t", 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := o.Persist(); !errors.Is(err, errInjected) {
		t.Fatalf("Persist = %v, want the injected error", err)
	}
	if !o.Dirty() {
		t.Fatal("table clean after a failed Persist")
	}
	if err := o.Persist(); err != nil {
		t.Fatal(err)
	}
	o2, err := OpenConsumerOffsets(vfs.OS, filepath.Join(dir, ConsumerOffsetsFile))
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := o2.Query("g", "t", 0); !ok || off != 5 {
		t.Fatalf("reloaded offset %d, %v", off, ok)
	}
}

func TestTopicsApplyVersionGated(t *testing.T) {
	dir := t.TempDir()
	master, _ := OpenTopics(vfs.OS, filepath.Join(dir, "m.json"))
	slave, _ := OpenTopics(vfs.OS, filepath.Join(dir, "s.json"))
	for _, n := range []string{"t1", "t2"} {
		if err := master.Put(topic(n, 4)); err != nil {
			t.Fatal(err)
		}
	}
	if err := slave.Put(topic("slave_only", 1)); err != nil {
		t.Fatal(err)
	}
	snap := master.Snapshot()
	changed, err := slave.Apply(snap)
	if err != nil || !changed {
		t.Fatalf("Apply = %v, %v", changed, err)
	}
	if _, ok := slave.Get("slave_only"); ok {
		t.Fatal("topic missing from the master survived a replace")
	}
	if got := slave.List(); len(got) != 2 || got[0] != topic("t1", 4) || got[1] != topic("t2", 4) {
		t.Fatalf("slave topics %+v", got)
	}
	if !slave.Version().Equal(master.Version()) {
		t.Fatalf("slave version %v, want the master's %v", slave.Version(), master.Version())
	}
	if !slave.Dirty() {
		t.Fatal("Apply did not mark the table dirty")
	}
	// Same version again: nothing happens, even if the content differs.
	forged := snap
	forged.Topics = map[string]TopicConfig{"other": topic("other", 1)}
	if changed, err := slave.Apply(forged); err != nil || changed {
		t.Fatalf("Apply with an equal version = %v, %v; want no change", changed, err)
	}
	if _, ok := slave.Get("t1"); !ok {
		t.Fatal("equal-version Apply replaced the table")
	}
	// A newer master version is applied.
	if err := master.Put(topic("t3", 2)); err != nil {
		t.Fatal(err)
	}
	if changed, _ := slave.Apply(master.Snapshot()); !changed {
		t.Fatal("newer version not applied")
	}
	if _, ok := slave.Get("t3"); !ok {
		t.Fatal("t3 missing after Apply")
	}
	// Invalid snapshots are rejected whole.
	bad := master.Snapshot()
	bad.DataVersion = bad.DataVersion.Next()
	bad.Topics["zz"] = TopicConfig{TopicName: "zz"} // 0 queues
	if _, err := slave.Apply(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Apply of an invalid snapshot = %v", err)
	}
	bad = master.Snapshot()
	bad.DataVersion = bad.DataVersion.Next()
	bad.Topics["key"] = topic("different", 1)
	if _, err := slave.Apply(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Apply with a mismatched key = %v", err)
	}
	if !slave.Version().Equal(master.Version()) || len(slave.List()) != 3 {
		t.Fatal("a rejected snapshot changed the table")
	}
}

func TestSubscriptionGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), SubscriptionGroupsFile)
	g, err := OpenSubscriptionGroups(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	c, created, err := g.GetOrCreate("CID_orders")
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if !c.ConsumeEnable || !c.ConsumeBroadcastEnable || c.RetryMaxTimes != DefaultRetryMaxTimes || c.RetryQueueNums != 1 || c.WhichBrokerWhenConsumeSlowly != 1 {
		t.Fatalf("defaults %+v", c)
	}
	c.RetryMaxTimes = 3
	c.ConsumeEnable = false
	if err := g.Put(c); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []SubscriptionGroupConfig{
		{GroupName: ""},
		{GroupName: strings.Repeat("g", MaxGroupNameLen+1)},
		{GroupName: "g@x"},
		func() SubscriptionGroupConfig { c := DefaultSubscriptionGroup("g"); c.RetryMaxTimes = -1; return c }(),
		func() SubscriptionGroupConfig { c := DefaultSubscriptionGroup("g"); c.BrokerID = -1; return c }(),
	} {
		if err := g.Put(bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Put(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if err := g.Put(DefaultSubscriptionGroup(strings.Repeat("g", MaxGroupNameLen))); err != nil {
		t.Fatalf("a %d-byte group name was rejected: %v", MaxGroupNameLen, err)
	}
	if err := g.Persist(); err != nil {
		t.Fatal(err)
	}
	g2, err := OpenSubscriptionGroups(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := g2.Get("CID_orders"); got != c {
		t.Fatalf("reloaded %+v, want %+v", got, c)
	}
	if !reflect.DeepEqual(g2.Snapshot(), g.Snapshot()) {
		t.Fatal("reloaded snapshot differs")
	}
	if !g2.Delete("CID_orders") || len(g2.List()) != 1 {
		t.Fatal("Delete")
	}

	// Version-gated replace.
	other, _ := OpenSubscriptionGroups(vfs.OS, filepath.Join(t.TempDir(), "x.json"))
	if changed, err := other.Apply(g.Snapshot()); err != nil || !changed {
		t.Fatal(changed, err)
	}
	if changed, _ := other.Apply(g.Snapshot()); changed {
		t.Fatal("second Apply of the same version changed the table")
	}
	if got, _ := other.Get("CID_orders"); got != c {
		t.Fatalf("applied %+v", got)
	}
}

func TestSubscriptionGroupJSONDefaults(t *testing.T) {
	var c SubscriptionGroupConfig
	if err := json.Unmarshal([]byte(`{"groupName":"g","retryMaxTimes":2}`), &c); err != nil {
		t.Fatal(err)
	}
	want := DefaultSubscriptionGroup("g")
	want.RetryMaxTimes = 2
	if c != want {
		t.Fatalf("decoded %+v, want %+v", c, want)
	}
	var s SubscriptionGroupsSnapshot
	if err := json.Unmarshal([]byte(`{"subscriptionGroupTable":{"g":{"groupName":"g","consumeEnable":false}}}`), &s); err != nil {
		t.Fatal(err)
	}
	if g := s.Groups["g"]; g.ConsumeEnable || !g.ConsumeBroadcastEnable || g.RetryMaxTimes != DefaultRetryMaxTimes {
		t.Fatalf("decoded %+v", g)
	}
}

func TestConsumerOffsetsLocal(t *testing.T) {
	path := filepath.Join(t.TempDir(), ConsumerOffsetsFile)
	o, err := OpenConsumerOffsets(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(o.Commit("g1", "t1", 0, 100))
	must(o.Commit("g1", "t1", 1, 50))
	must(o.Commit("g1", "t2", 0, 7))
	must(o.Commit("g2", "t1", 0, 3))
	must(o.Commit("%RETRY%g1", "%RETRY%g1", 0, 1))
	v := o.Version()
	must(o.Commit("g1", "t1", 0, 100)) // unchanged
	if !o.Version().Equal(v) {
		t.Fatal("re-committing the same offset advanced the version")
	}
	must(o.Commit("g1", "t1", 0, 10)) // deliberate rewind is allowed locally
	if off, ok := o.Query("g1", "t1", 0); !ok || off != 10 {
		t.Fatalf("after rewind Query = %d, %v; want 10", off, ok)
	}
	if _, ok := o.Query("g1", "t1", 9); ok {
		t.Fatal("Query of an uncommitted queue found something")
	}
	if got := o.QueryAll("g1", "t1"); !maps.Equal(got, map[int32]int64{0: 10, 1: 50}) {
		t.Fatalf("QueryAll = %v", got)
	}
	if got := o.Groups(); !reflect.DeepEqual(got, []string{"%RETRY%g1", "g1", "g2"}) {
		t.Fatalf("Groups = %v", got)
	}
	if got := o.TopicsOfGroup("g1"); !reflect.DeepEqual(got, []string{"t1", "t2"}) {
		t.Fatalf("TopicsOfGroup = %v", got)
	}
	if got := o.GroupsOfTopic("t1"); !reflect.DeepEqual(got, []string{"g1", "g2"}) {
		t.Fatalf("GroupsOfTopic = %v", got)
	}
	for _, bad := range []struct {
		g, t string
		q    int32
		off  int64
	}{{"", "t", 0, 0}, {"g", "", 0, 0}, {"g@x", "t", 0, 0}, {"g", "t@x", 0, 0}, {"g", "t", -1, 0}, {"g", "t", 0, -1}} {
		if err := o.Commit(bad.g, bad.t, bad.q, bad.off); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Commit(%+v) = %v, want ErrInvalid", bad, err)
		}
	}

	must(o.Persist())
	o2, err := OpenConsumerOffsets(vfs.OS, path)
	must(err)
	if !reflect.DeepEqual(o2.Snapshot(), o.Snapshot()) {
		t.Fatalf("reloaded %+v\nwant %+v", o2.Snapshot(), o.Snapshot())
	}

	if n := o.DeleteGroup("g1"); n != 2 {
		t.Fatalf("DeleteGroup removed %d topics, want 2", n)
	}
	if _, ok := o.Query("g1", "t1", 1); ok {
		t.Fatal("offset survived DeleteGroup")
	}
	if n := o.DeleteTopic("t1"); n != 1 {
		t.Fatalf("DeleteTopic removed %d groups, want 1", n)
	}
	if got := o.Groups(); !reflect.DeepEqual(got, []string{"%RETRY%g1"}) {
		t.Fatalf("Groups after deletes = %v", got)
	}
	if n := o.DeleteGroup("nobody"); n != 0 {
		t.Fatal("DeleteGroup of an unknown group removed something")
	}
}

// TestConsumerOffsetsApplyNeverLowers is apache/rocketmq#1094: while the
// master is down, consumers commit on the slave; when the master returns
// with older offsets and a newer data version, syncing must not roll the
// slave's offsets back.
func TestConsumerOffsetsApplyNeverLowers(t *testing.T) {
	dir := t.TempDir()
	master, _ := OpenConsumerOffsets(vfs.OS, filepath.Join(dir, "m.json"))
	slave, _ := OpenConsumerOffsets(vfs.OS, filepath.Join(dir, "s.json"))

	// Both agree at first.
	for q := int32(0); q < 4; q++ {
		if err := master.Commit("g", "t", q, 100); err != nil {
			t.Fatal(err)
		}
	}
	if changed, err := slave.Apply(master.Snapshot()); err != nil || !changed {
		t.Fatal(changed, err)
	}
	// The master goes down; consumers move on against the slave.
	for q := int32(0); q < 2; q++ {
		if err := slave.Commit("g", "t", q, 250); err != nil {
			t.Fatal(err)
		}
	}
	if err := slave.Commit("g", "slave_topic", 0, 9); err != nil {
		t.Fatal(err)
	}
	// The master returns: its offsets are stale for queues 0 and 1, it
	// advanced queue 3 itself and knows a queue the slave does not.
	if err := master.Commit("g", "t", 3, 400); err != nil {
		t.Fatal(err)
	}
	if err := master.Commit("g2", "t", 0, 5); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ { // a much newer version must not matter
		_ = master.Commit("g", "other", 0, int64(i+1))
	}
	changed, err := slave.Apply(master.Snapshot())
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	want := map[string]map[int32]int64{
		"t@g":           {0: 250, 1: 250, 2: 100, 3: 400},
		"slave_topic@g": {0: 9},
		"t@g2":          {0: 5},
		"other@g":       {0: 5},
	}
	if got := slave.Snapshot().Offsets; !reflect.DeepEqual(got, want) {
		t.Fatalf("after Apply:\n got %v\nwant %v", got, want)
	}
	// Re-applying changes nothing and does not advance the version.
	v := slave.Version()
	if changed, _ := slave.Apply(master.Snapshot()); changed || !slave.Version().Equal(v) {
		t.Fatal("idempotent Apply reported a change")
	}
	// Invalid snapshots are rejected whole.
	for _, bad := range []map[string]map[int32]int64{
		{"nogroup": {0: 1}},
		{"t@g": {0: 1_000_000}, "x@y": {-1: 1}},
		{"t@g": {0: 1_000_000}, "x@y": {0: -1}},
		{"t@g": {0: 1_000_000}, "a b@y": {0: 1}},
	} {
		if _, err := slave.Apply(OffsetsSnapshot{Offsets: bad}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Apply(%v) = %v, want ErrInvalid", bad, err)
		}
	}
	if off, _ := slave.Query("g", "t", 0); off != 250 {
		t.Fatal("a rejected snapshot changed an offset")
	}
}

// TestConsumerOffsetsApplyIsMax checks the merge rule on random tables:
// every queue ends at max(local, remote) and no queue disappears.
func TestConsumerOffsetsApplyIsMax(t *testing.T) {
	gen := rapid.MapOf(
		rapid.SampledFrom([]string{"t@g", "t@h", "u@g", "%RETRY%g@g"}),
		rapid.MapOf(rapid.Int32Range(0, 5), rapid.Int64Range(0, 1000)),
	)
	dir := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		local, remote := gen.Draw(rt, "local"), gen.Draw(rt, "remote")
		o, _ := OpenConsumerOffsets(vfs.OS, filepath.Join(dir, "unused.json"))
		for key, qs := range local {
			tp, g, _ := SplitOffsetKey(key)
			for q, off := range qs {
				if err := o.Commit(g, tp, q, off); err != nil {
					rt.Fatal(err)
				}
			}
		}
		if _, err := o.Apply(OffsetsSnapshot{Offsets: remote}); err != nil {
			rt.Fatal(err)
		}
		got := o.Snapshot().Offsets
		want := map[string]map[int32]int64{}
		for _, m := range []map[string]map[int32]int64{local, remote} {
			for key, qs := range m {
				for q, off := range qs {
					if want[key] == nil {
						want[key] = map[int32]int64{}
					}
					if cur, ok := want[key][q]; !ok || off > cur {
						want[key][q] = off
					}
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			rt.Fatalf("got %v, want %v", got, want)
		}
	})
}

func TestConcurrentCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 8, 300
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 1; i <= perWriter; i++ {
				if err := s.ConsumerOffsets.Commit(fmt.Sprintf("g%d", w%3), "t", int32(w), int64(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // persist, snapshot and read while commits run
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.PersistAll(); err != nil {
				t.Error(err)
				return
			}
			_ = s.Snapshot()
			_ = s.ConsumerOffsets.Groups()
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	for w := 0; w < writers; w++ {
		if off, ok := s.ConsumerOffsets.Query(fmt.Sprintf("g%d", w%3), "t", int32(w)); !ok || off != perWriter {
			t.Fatalf("writer %d: offset %d, %v", w, off, ok)
		}
	}
	if err := s.PersistAll(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s2.ConsumerOffsets.Snapshot(), s.ConsumerOffsets.Snapshot()) {
		t.Fatal("reloaded offsets differ after concurrent commits")
	}
}

func TestDelayOffsets(t *testing.T) {
	path := filepath.Join(t.TempDir(), DelayOffsetsFile)
	d, _ := OpenDelayOffsets(vfs.OS, path)
	for lvl := int32(1); lvl <= 18; lvl++ {
		if err := d.Set(lvl, int64(lvl)*10); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Set(0, 1); !errors.Is(err, ErrInvalid) {
		t.Fatal("level 0 accepted")
	}
	if err := d.Set(1, -1); !errors.Is(err, ErrInvalid) {
		t.Fatal("negative offset accepted")
	}
	if err := d.Set(2, 5); err != nil { // lowering locally is allowed
		t.Fatal(err)
	}
	if off, ok := d.Get(2); !ok || off != 5 {
		t.Fatal("Get(2)", off, ok)
	}
	if err := d.Persist(); err != nil {
		t.Fatal(err)
	}
	d2, err := OpenDelayOffsets(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(d2.All(), d.All()) || !d2.Version().Equal(d.Version()) {
		t.Fatal("reload differs")
	}
	changed, err := d2.Apply(DelayOffsetsSnapshot{Offsets: map[int32]int64{1: 0, 2: 50, 19: 4}})
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	if off, _ := d2.Get(1); off != 10 {
		t.Fatal("Apply lowered level 1 to", off)
	}
	if off, _ := d2.Get(2); off != 50 {
		t.Fatal("Apply did not raise level 2:", off)
	}
	if off, ok := d2.Get(19); !ok || off != 4 {
		t.Fatal("Apply did not add level 19")
	}
	if _, err := d2.Apply(DelayOffsetsSnapshot{Offsets: map[int32]int64{0: 1}}); !errors.Is(err, ErrInvalid) {
		t.Fatal("Apply accepted level 0")
	}
}

func TestDataVersion(t *testing.T) {
	v := DataVersion{StateVersion: 7, Timestamp: 1, Counter: 41}
	n := v.Next()
	if n.StateVersion != 7 || n.Counter != 42 || n.Equal(v) || n.Timestamp <= 1 {
		t.Fatalf("Next = %v", n)
	}
	b, _ := json.Marshal(v)
	if string(b) != `{"stateVersion":7,"timestamp":1,"counter":41}` {
		t.Fatalf("JSON %s", b)
	}
	if !v.Equal(DataVersion{7, 1, 41}) || v.Equal(DataVersion{7, 1, 40}) {
		t.Fatal("Equal")
	}
}
