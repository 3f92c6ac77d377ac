package failover

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/keelmq/keel/core/record"
)

// FuzzDecodePulled: any pull body decodes or fails, never panics; a
// decoded body that is not empty yields messages, and each id read from
// KEYS is written in the body as 16 hex digits (of either case).
func FuzzDecodePulled(f *testing.F) {
	m := &record.Message{Topic: topic, QueueID: 1, Body: []byte("body"), Properties: []byte("KEYS\x010000010000000002\x02UNIQ_KEY\x01AB\x02"),
		BornTimestamp: 1700000000000}
	one, err := record.Encode(nil, m, record.Limits{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(one)
	f.Add(append(append([]byte{}, one...), one...))
	f.Add([]byte{0, 0, 0, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := decodePulled(b)
		if err != nil {
			return
		}
		if len(b) > 0 && len(msgs) == 0 {
			t.Fatalf("%d bytes decoded to no message", len(b))
		}
		for _, p := range msgs {
			if p.ok && !bytes.Contains(bytes.ToUpper(b), []byte(fmt.Sprintf("KEYS\x01%016X", p.id))) {
				t.Fatalf("id %016X is not in the body", p.id)
			}
		}
	})
}

// FuzzDecodeRoute: any route body decodes or fails, never panics; a
// decoded route names a slave only if some group listed a non-zero id.
func FuzzDecodeRoute(f *testing.F) {
	f.Add([]byte(`{"brokerDatas":[{"brokerName":"bench-a","brokerAddrs":{"0":"127.0.0.1:1","1":"127.0.0.1:2"}}]}`))
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{"2":"b","1":"a"}}]}`))
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRoute(b)
		if err != nil && (r.master != "" || r.slave != "") {
			t.Fatalf("error %v with a route %+v", err, r)
		}
	})
}

func TestDecodeRoute(t *testing.T) {
	r, err := decodeRoute([]byte(`{"brokerDatas":[{"brokerAddrs":{"3":"c","0":"m","2":"b"}}]}`))
	if err != nil || r.master != "m" || r.slave != "b" {
		t.Fatalf("route %+v, %v: want master m, slave b (the lowest other id)", r, err)
	}
	if _, err := decodeRoute([]byte(`{"brokerDatas":[{"brokerAddrs":{"-1":"x"}}]}`)); err == nil {
		t.Fatal("a negative broker id was accepted")
	}
}
