package namesrv

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/host/remoting"
)

var update = flag.Bool("update", false, "rewrite the golden frames and fuzz seeds under testdata")

// javaBody5 is a RegisterBrokerBody as RocketMQ 5's fastjson writes it
// (fields sorted, TopicConfigAndMappingSerializeWrapper's extra fields,
// attributes on every topic).
const javaBody5 = `{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000123},` +
	`"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{` +
	`"TBW102":{"attributes":{},"order":false,"perm":7,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TBW102","topicSysFlag":0,"writeQueueNums":8},` +
	`"TopicTest":{"attributes":{"+message.type":"FIFO"},"order":true,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}},` +
	`"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}`

// javaFrame assembles a remoting frame with a Java-shaped JSON header
// (RemotingCommand's fastjson form) around body. The version is some 5.x
// ordinal; the name server does not look at it.
func javaFrame(ext map[string]string, body []byte) []byte {
	keys := sortedKeys(ext)
	var h strings.Builder
	h.WriteString(`{"code":103,"extFields":{`)
	for i, k := range keys {
		if i > 0 {
			h.WriteByte(',')
		}
		fmt.Fprintf(&h, "%q:%q", k, ext[k])
	}
	h.WriteString(`},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":453}`)
	out := binary.BigEndian.AppendUint32(nil, uint32(4+h.Len()+len(body)))
	out = binary.BigEndian.AppendUint32(out, uint32(h.Len()))
	out = append(out, h.String()...)
	return append(out, body...)
}

func javaHeader(body []byte, compressed bool) map[string]string {
	return map[string]string{
		"brokerAddr": "192.168.0.10:10911", "brokerId": "0", "brokerName": "broker-a", "clusterName": "DefaultCluster",
		"haServerAddr": "192.168.0.10:10912", "enableActingMaster": "false", "compressed": strconv.FormatBool(compressed),
		"bodyCrc32": strconv.FormatInt(bodyCRC32(body), 10),
	}
}

// zlibParts5 builds a compressed body by hand, RocketMQ 5's layout (topic
// lines with an attributes field, a mapping section), or 4.x's without
// the mapping section.
func zlibBody(lines []string, withMappings bool) []byte {
	var raw bytes.Buffer
	part := func(s string) {
		raw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(s))))
		raw.WriteString(s)
	}
	part(`{"counter":3,"stateVersion":0,"timestamp":1700000000123}`)
	raw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(lines))))
	for _, l := range lines {
		part(l)
	}
	part(`[]`)
	if withMappings {
		raw.Write(binary.BigEndian.AppendUint32(nil, 1))
		part(`{"bname":"broker-a","epoch":0,"topic":"Static","totalQueues":0}`)
	}
	var out bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&out, zlib.BestCompression)
	zw.Write(raw.Bytes())
	zw.Close()
	return out.Bytes()
}

var goldenFrames = map[string]func() []byte{
	"register_java5_json.frame": func() []byte {
		return javaFrame(javaHeader([]byte(javaBody5), false), []byte(javaBody5))
	},
	"register_java5_zlib.frame": func() []byte {
		b := zlibBody([]string{"TBW102 8 8 7 SINGLE_TAG {}", `TopicTest 4 4 6 SINGLE_TAG {"+message.type":"FIFO"}`}, true)
		return javaFrame(javaHeader(b, true), b)
	},
	// What RocketMQ 5 with compressedRegister really sends: compressed=false.
	"register_java5_zlib_flagged_false.frame": func() []byte {
		b := zlibBody([]string{"TBW102 8 8 7 SINGLE_TAG {}", `TopicTest 4 4 6 SINGLE_TAG {"+message.type":"FIFO"}`}, true)
		return javaFrame(javaHeader(b, false), b)
	},
	"register_java4_zlib.frame": func() []byte {
		b := zlibBody([]string{"TBW102 8 8 7 SINGLE_TAG", "TopicTest 4 4 6 SINGLE_TAG"}, false)
		return javaFrame(javaHeader(b, true), b)
	},
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, goldenFrames[name](), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to write it)", err)
	}
	if !bytes.Equal(b, goldenFrames[name]()) {
		t.Fatalf("%s differs from what its builder makes; rerun with -update if the builder changed on purpose", path)
	}
	return b
}

func TestGoldenJavaRegisterFrames(t *testing.T) {
	want := map[string]meta.TopicConfig{
		"TBW102":    {TopicName: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 7, TopicFilterType: "SINGLE_TAG"},
		"TopicTest": {TopicName: "TopicTest", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: "SINGLE_TAG", Order: true},
	}
	for name := range goldenFrames {
		t.Run(name, func(t *testing.T) {
			frame := readGolden(t, name)
			cmd, err := remoting.ReadCommand(bufio.NewReader(bytes.NewReader(frame)), remoting.DefaultMaxFrame)
			if err != nil {
				t.Fatal(err)
			}
			r, err := decodeRegister(cmd)
			if err != nil {
				t.Fatal(err)
			}
			w := want
			if strings.Contains(name, "zlib") { // the line form has no order flag
				w = map[string]meta.TopicConfig{"TBW102": want["TBW102"], "TopicTest": want["TopicTest"]}
				tt := w["TopicTest"]
				tt.Order = false
				w["TopicTest"] = tt
			}
			if r.Cluster != "DefaultCluster" || r.BrokerName != "broker-a" || r.BrokerAddr != "192.168.0.10:10911" || r.BrokerID != 0 ||
				r.HAServerAddr != "192.168.0.10:10912" || r.HeartbeatTimeout != 0 {
				t.Fatalf("identity %+v", r)
			}
			if !reflect.DeepEqual(r.Topics, w) {
				t.Fatalf("topics\n got %+v\nwant %+v", r.Topics, w)
			}
			if r.DataVersion != (meta.DataVersion{Counter: 3, Timestamp: 1700000000123}) {
				t.Fatalf("version %+v", r.DataVersion)
			}
		})
	}
}

// TestGoldenKeelRegisterFrame pins the registrar's own request: header
// fields and the JSON body Java's RegisterBrokerBody.decode reads.
func TestGoldenKeelRegisterFrame(t *testing.T) {
	r := Registration{Cluster: "C1", BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911", BrokerID: 1, HAServerAddr: "10.0.0.1:10912",
		HeartbeatTimeout: 10 * time.Second, Topics: topics(topic("T", 4)), DataVersion: meta.DataVersion{StateVersion: 2, Timestamp: 5, Counter: 7}, FilterServers: []string{}}
	cmd, err := newRegisterRequest(r, false)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Opaque, cmd.Language, cmd.Version = 1, remoting.ServerLanguage, remoting.ServerVersion
	got := cmd.AppendFrame(nil)
	path := filepath.Join("testdata", "register_keel.frame")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("registrar frame changed\n got %q\nwant %q", got, want)
	}
	wantBody := `{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false}},` +
		`"dataVersion":{"stateVersion":2,"timestamp":5,"counter":7}},"filterServerList":[]}`
	if string(cmd.Body) != wantBody {
		t.Fatalf("body\n got %s\nwant %s", cmd.Body, wantBody)
	}
	back, err := decodeRegister(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip\n got %+v\nwant %+v", back, r)
	}
}

func TestRegisterBodyRoundTrips(t *testing.T) {
	tc := topic("T", 4)
	tc.TopicSysFlag, tc.Order = 3, true
	body := registerBody{topics: topics(tc, topic("U", 1)), version: meta.DataVersion{StateVersion: 1, Timestamp: 2, Counter: 3}, filterServers: []string{"10.0.0.9:1"}}
	for _, compress := range []bool{false, true} {
		b, err := encodeRegisterBody(body, compress)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRegisterBody(b, compress)
		if err != nil {
			t.Fatalf("compress=%t: %v", compress, err)
		}
		want := body
		if compress { // the line form carries neither sysFlag nor order
			want.topics = topics(topic("T", 4), topic("U", 1))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("compress=%t\n got %+v\nwant %+v", compress, got, want)
		}
	}
	got, err := decodeRegisterBody(nil, true)
	if err != nil || len(got.topics) != 0 || got.version != (meta.DataVersion{}) {
		t.Fatalf("empty body: %+v %v", got, err)
	}
}

func TestCompressedBodyRefusals(t *testing.T) {
	good := zlibBody([]string{"T 4 4 6 SINGLE_TAG"}, true)
	trailing := func() []byte {
		zr, _ := zlib.NewReader(bytes.NewReader(good))
		var raw bytes.Buffer
		raw.ReadFrom(zr)
		raw.WriteString("x")
		var out bytes.Buffer
		zw := zlib.NewWriter(&out)
		zw.Write(raw.Bytes())
		zw.Close()
		return out.Bytes()
	}()
	for _, tc := range []struct {
		name, want string
		body       []byte
	}{
		{"not zlib", "zlib: invalid header", []byte("{}")},
		{"truncated", "unexpected EOF", good[:len(good)-8]},
		{"short line", "has 4 fields", zlibBody([]string{"T 4 4 6"}, false)},
		{"bad number", `readQueueNums "x" is not an int32`, zlibBody([]string{"T x 4 6 SINGLE_TAG"}, false)},
		{"trailing bytes", "trailing bytes", trailing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRegisterBody(tc.body, true)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestHeaderBoolIsJavaParseBoolean(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "TRUE": true, "True": true, "1": false, "t": false, "": false, "false": false} {
		f := fields{cmd: request(0, map[string]string{"compressed": v}, nil)}
		if got := f.bool("compressed"); got != want {
			t.Errorf("%q: %t, want %t", v, got, want)
		}
	}
}

// TestGoldenJavaFrameOverTheWire sends the RocketMQ 5 frame's bytes as
// they are to a served name server and reads the raw answer.
func TestGoldenJavaFrameOverTheWire(t *testing.T) {
	s, _, addr := newTestServer(t, Config{})
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(readGolden(t, "register_java5_json.frame")); err != nil {
		t.Fatal(err)
	}
	resp, err := remoting.ReadCommand(bufio.NewReader(nc), remoting.DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.IsResponse() || resp.Opaque != 3 || resp.Code != remoting.Success {
		t.Fatalf("answer %+v", resp)
	}
	s.mu.Lock()
	rd, ok := s.reg.route("TopicTest")
	s.mu.Unlock()
	if !ok || rd.BrokerDatas[0].BrokerAddrs["0"] != "192.168.0.10:10911" || rd.QueueDatas[0].WriteQueueNums != 4 {
		t.Fatalf("route after the Java frame: %+v", rd)
	}
}
