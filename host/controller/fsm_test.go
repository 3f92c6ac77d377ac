package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"
)

var testGroups = []GroupKey{{"c1", "broker-a"}, {"c1", "broker-b"}, {"c2", "broker-a"}}

// genCommand draws a command that is often valid for s and often not:
// stale epochs, non-members, sets without the master.
func genCommand(t *rapid.T, s *replicated) command {
	k := rapid.SampledFrom(testGroups).Draw(t, "group")
	g, _ := s.group(k)
	id := func(label string) int64 { return rapid.Int64Range(0, g.NextID+1).Draw(t, label) }
	epoch := func(label string, cur int32) int32 {
		if rapid.Bool().Draw(t, label+"Current") {
			return cur
		}
		return rapid.Int32Range(0, cur+2).Draw(t, label)
	}
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		r := &registerCmd{Group: k, Addr: rapid.SampledFrom([]string{"h:1", "h:2", "h:3", "h:4"}).Draw(t, "addr")}
		if rapid.Bool().Draw(t, "withNode") {
			r.NodeID = rapid.SampledFrom([]string{"n1", "n2", "n3"}).Draw(t, "node")
		}
		return command{V: commandVersion, Type: cmdRegister, Register: r}
	case 1:
		return command{V: commandVersion, Type: cmdElect, Elect: &electCmd{
			Group: k, ExpectEpoch: epoch("expect", g.MasterEpoch), NewMaster: id("newMaster"),
			Unclean: rapid.Bool().Draw(t, "unclean"),
		}}
	case 2:
		master := g.MasterID
		if !rapid.Bool().Draw(t, "fromMaster") {
			master = id("asker")
		}
		var set []int64
		for _, m := range g.Members {
			if rapid.Bool().Draw(t, "inSet") {
				set = append(set, m.ID)
			}
		}
		if rapid.Bool().Draw(t, "addMaster") && master != 0 && !slices.Contains(set, master) {
			set = append(set, master)
		}
		return command{V: commandVersion, Type: cmdAlter, Alter: &alterCmd{
			Group: k, MasterID: master, MasterEpoch: epoch("masterEpoch", g.MasterEpoch),
			SetEpoch: epoch("setEpoch", g.SyncStateSetEpoch), Set: set,
		}}
	default:
		return command{V: commandVersion, Type: cmdAnnounce, Announce: &announceCmd{
			ServerID: rapid.SampledFrom([]string{"n1", "n2"}).Draw(t, "server"), RemotingAddr: "r:1",
		}}
	}
}

func checkGroup(t *rapid.T, g *Group) {
	if err := g.validate(); err != nil {
		t.Fatal(err)
	}
}

func TestStateProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newState()
		f := newFSM()
		identities := map[GroupKey]map[string]int64{}
		n := rapid.IntRange(1, 80).Draw(t, "n")
		for i := range n {
			c := genCommand(t, s)
			k := groupOf(c)
			before, existed := s.group(k)
			res := s.apply(c)

			// The same command through the raft FSM, JSON-encoded, agrees.
			data, err := encodeCommand(c)
			if err != nil {
				t.Fatal(err)
			}
			fres := f.Apply(&raft.Log{Index: uint64(i + 1), Data: data}).(applyResult)
			if (res.Err == nil) != (fres.Err == nil) || !reflect.DeepEqual(res.Group, fres.Group) {
				t.Fatalf("FSM and direct apply disagree on %+v: %v / %v", c, res, fres)
			}
			after, _ := s.group(k)
			if res.Err != nil && existed && !reflect.DeepEqual(before, after) {
				t.Fatalf("refused %+v (%v) changed the group: %+v -> %+v", c, res.Err, before, after)
			}
			if res.Err == nil && c.Type != cmdAnnounce {
				checkGroup(t, s.Groups[k])
			}
			switch c.Type {
			case cmdRegister:
				if res.Err != nil {
					t.Fatalf("valid register refused: %v", res.Err)
				}
				m := Member{Addr: c.Register.Addr, NodeID: c.Register.NodeID}
				if identities[k] == nil {
					identities[k] = map[string]int64{}
				}
				if prev, ok := identities[k][m.identity()]; ok && prev != res.BrokerID {
					t.Fatalf("identity %s got id %d, before %d", m.identity(), res.BrokerID, prev)
				}
				identities[k][m.identity()] = res.BrokerID
			case cmdElect:
				e := c.Elect
				if res.Err != nil {
					if after.MasterEpoch != before.MasterEpoch {
						t.Fatal("refused election moved the epoch")
					}
					break
				}
				if after.MasterEpoch != before.MasterEpoch+1 {
					t.Fatalf("election took master epoch %d to %d", before.MasterEpoch, after.MasterEpoch)
				}
				if e.NewMaster != 0 {
					if !e.Unclean && before.MasterEpoch != 0 && !before.InSyncStateSet(e.NewMaster) {
						t.Fatalf("clean election of %d outside SyncStateSet %v", e.NewMaster, before.SyncStateSet)
					}
					if after.SyncStateSetEpoch <= before.SyncStateSetEpoch || !slices.Equal(after.SyncStateSet, []int64{e.NewMaster}) {
						t.Fatalf("election left SyncStateSet %v epoch %d (before %d)", after.SyncStateSet, after.SyncStateSetEpoch, before.SyncStateSetEpoch)
					}
				}
			case cmdAlter:
				a := c.Alter
				if existed && a.MasterEpoch != before.MasterEpoch && res.Err == nil {
					t.Fatalf("alter from stale master epoch %d accepted at %d", a.MasterEpoch, before.MasterEpoch)
				}
				if existed && a.MasterEpoch != before.MasterEpoch && !errors.Is(res.Err, ErrFencedMasterEpoch) {
					t.Fatalf("stale alter refused with %v, want ErrFencedMasterEpoch", res.Err)
				}
				if res.Err == nil {
					if after.SyncStateSetEpoch != before.SyncStateSetEpoch+1 || after.MasterEpoch != before.MasterEpoch {
						t.Fatalf("alter epochs: set %d->%d master %d->%d", before.SyncStateSetEpoch, after.SyncStateSetEpoch, before.MasterEpoch, after.MasterEpoch)
					}
				}
			}
			if existed && (after.MasterEpoch < before.MasterEpoch || after.SyncStateSetEpoch < before.SyncStateSetEpoch) {
				t.Fatalf("an epoch went backwards: %+v -> %+v", before, after)
			}
		}

		// Snapshot and restore give the same state.
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
			t.Fatal(err)
		}
		g := newFSM()
		if err := g.Restore(io.NopCloser(&buf)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g.state.encodable(), s.encodable()) {
			t.Fatalf("restored state differs:\n%+v\n%+v", g.state.encodable(), s.encodable())
		}
	})
}

func groupOf(c command) GroupKey {
	switch {
	case c.Register != nil:
		return c.Register.Group
	case c.Elect != nil:
		return c.Elect.Group
	case c.Alter != nil:
		return c.Alter.Group
	}
	return GroupKey{}
}

func TestApplyRefusesBadEntries(t *testing.T) {
	s := newState()
	for name, data := range map[string]string{
		"not json":      "{",
		"old version":   `{"v":0,"type":"register","register":{"group":{"cluster":"c","brokerName":"b"},"addr":"a"}}`,
		"no body":       `{"v":1,"type":"elect"}`,
		"unknown type":  `{"v":1,"type":"promote"}`,
		"register addr": `{"v":1,"type":"register","register":{"group":{"cluster":"c","brokerName":"b"}}}`,
	} {
		if res := s.applyEntry([]byte(data)); res.Err == nil {
			t.Errorf("%s: applied", name)
		}
	}
	if len(s.Groups) != 0 {
		t.Fatalf("refused entries created groups: %v", s.Groups)
	}
}

func TestRestoreRefusesBadSnapshots(t *testing.T) {
	f := newFSM()
	f.state.apply(command{V: commandVersion, Type: cmdRegister, Register: &registerCmd{Group: testGroups[0], Addr: "a:1"}})
	want := f.state.encodable()
	bad := []string{"[", `{"version":2}`, `{"version":1,"groups":[{"cluster":"c","brokerName":"b"},{"cluster":"c","brokerName":"b"}]}`}
	for _, b := range bad {
		if err := f.Restore(io.NopCloser(bytes.NewBufferString(b))); err == nil {
			t.Errorf("restored %s", b)
		}
	}
	if !reflect.DeepEqual(f.state.encodable(), want) {
		t.Fatal("a failed restore changed the state")
	}
	b, _ := json.Marshal(want)
	if err := f.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
}

type memSink struct{ *bytes.Buffer }

func (memSink) ID() string      { return "mem" }
func (memSink) Cancel() error   { return nil }
func (m *memSink) Close() error { return nil }
