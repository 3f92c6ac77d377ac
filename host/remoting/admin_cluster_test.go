package remoting

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestDecodeClusterInfo(t *testing.T) {
	for _, body := range []string{
		// RocketMQ's name server (fastjson, bare broker ids).
		`{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"C"}},"clusterAddrTable":{"C":["broker-a"]}}`,
		// Standard JSON, as keel's name server writes it.
		`{"brokerAddrTable":{"broker-a":{"cluster":"C","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911", "1":"10.0.0.2:10911"}}},"clusterAddrTable":{"C":["broker-a"]}}`,
	} {
		ci, err := DecodeClusterInfo([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		b := ci.BrokerAddrTable["broker-a"]
		if b.Cluster != "C" || b.BrokerAddrs[0] != "10.0.0.1:10911" || b.BrokerAddrs[1] != "10.0.0.2:10911" || len(ci.ClusterAddrTable["C"]) != 1 {
			t.Errorf("%s: decoded %+v", body, ci)
		}
	}
	if _, err := DecodeClusterInfo([]byte(`{"brokerAddrTable":{"b":{"brokerAddrs":{x:"a"}}}}`)); err == nil {
		t.Error("a bare non-numeric key was accepted")
	}
}

// FuzzQuoteIntKeys: never panics, leaves valid JSON as it is, and the
// string contents of what it changes stay the same.
func FuzzQuoteIntKeys(f *testing.F) {
	f.Add([]byte(`{"brokerAddrs":{0:"a",-1:"b"},"x":[1,2],"s":"{3:4}"}`))
	f.Add([]byte(`{"a":{"0":"x"}}`))
	f.Add([]byte(`{1 : 2, 3:{4:5}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out := quoteIntKeys(body)
		if json.Valid(body) && !bytes.Equal(out, body) {
			t.Fatalf("valid JSON %q changed to %q", body, out)
		}
		if len(out) < len(body) {
			t.Fatalf("%q shrank to %q", body, out)
		}
	})
}
