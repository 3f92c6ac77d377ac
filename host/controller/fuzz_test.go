package controller

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"

	"github.com/keelmq/keel/host/remoting"
)

// fuzzBase is a state with a group, a master and a two-member set, so that
// fuzzed entries can hit the accepting paths.
func fuzzBase() *replicated {
	s := newState()
	k := GroupKey{"c", "b"}
	for _, a := range []string{"h:1", "h:2", "h:3"} {
		s.apply(command{V: commandVersion, Type: cmdRegister, Register: &registerCmd{Group: k, Addr: a}})
	}
	s.apply(command{V: commandVersion, Type: cmdElect, Elect: &electCmd{Group: k, NewMaster: 1}})
	s.apply(command{V: commandVersion, Type: cmdAlter, Alter: &alterCmd{Group: k, MasterID: 1, MasterEpoch: 1, SetEpoch: 1, Set: []int64{1, 2}}})
	return s
}

// FuzzApplyEntry: any log entry is applied or refused without panicking;
// a refused one changes nothing, an accepted one keeps the invariants.
func FuzzApplyEntry(f *testing.F) {
	f.Add([]byte(`{"v":1,"type":"elect","elect":{"group":{"cluster":"c","brokerName":"b"},"expectEpoch":1,"newMaster":2}}`))
	f.Add([]byte(`{"v":1,"type":"alter","alter":{"group":{"cluster":"c","brokerName":"b"},"masterId":1,"masterEpoch":1,"setEpoch":2,"set":[1,3,3]}}`))
	f.Add([]byte(`{"v":1,"type":"register","register":{"group":{"cluster":"c","brokerName":"b"},"addr":"h:9","nodeId":"n"}}`))
	f.Add([]byte(`{"v":1,"type":"announce","announce":{"serverId":"x","remotingAddr":"r"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzBase()
		before := s.encodable()
		res := s.applyEntry(data)
		if res.Err != nil {
			if !reflect.DeepEqual(before, s.encodable()) {
				t.Fatalf("refused entry %q (%v) changed the state", data, res.Err)
			}
			return
		}
		for _, g := range s.Groups {
			if err := g.validate(); err != nil {
				t.Fatalf("entry %q: %v", data, err)
			}
		}
	})
}

// FuzzRestore: any snapshot is restored or refused; a restored one
// encodes back to a snapshot that restores to the same state.
func FuzzRestore(f *testing.F) {
	b, _ := json.Marshal(fuzzBase().encodable())
	f.Add(b)
	f.Add([]byte(`{"version":1,"groups":[],"controllers":{}}`))
	f.Add([]byte(`{"version":1,"groups":[{"cluster":"c","brokerName":"b"},{"cluster":"c","brokerName":"b"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newFSM()
		if err := m.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			return
		}
		snap, err := m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
			t.Fatal(err)
		}
		n := newFSM()
		if err := n.Restore(io.NopCloser(&buf)); err != nil {
			t.Fatalf("re-restoring %q: %v", buf.Bytes(), err)
		}
		if !reflect.DeepEqual(m.state.encodable(), n.state.encodable()) {
			t.Fatalf("snapshot round trip differs for %q", data)
		}
	})
}

// FuzzGroupFromReply: the client decodes any replica answer or refuses it.
func FuzzGroupFromReply(f *testing.F) {
	f.Add("1", "3", "2", []byte(`{"syncStateSet":[1,2],"syncStateSetEpoch":2,"members":[{"id":1,"addr":"a"}]}`))
	f.Add("x", "", "", []byte(`{`))
	f.Fuzz(func(t *testing.T, master, epoch, setEpoch string, body []byte) {
		resp := &remoting.Command{Body: body, ExtFields: remoting.FieldsOf(map[string]string{
			"masterBrokerId": master, "masterEpoch": epoch, "syncStateSetEpoch": setEpoch,
		})}
		g, err := groupFromReply(GroupKey{"c", "b"}, resp)
		if err == nil && g.GroupKey != (GroupKey{"c", "b"}) {
			t.Fatalf("decoded %+v", g)
		}
	})
}
