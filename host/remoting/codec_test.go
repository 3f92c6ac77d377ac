package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// realFirstFrame is the first frame rocketmq-client-go sends (observed with
// the real client, see the remoting reference §1.1).
var realFirstFrame = append([]byte{0x00, 0x00, 0x00, 0x73, 0x00, 0x00, 0x00, 0x6f},
	`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicS_77783"}}`...)

func readOne(t *testing.T, b []byte, max int) (*Command, error) {
	t.Helper()
	return ReadCommand(bufio.NewReader(bytes.NewReader(b)), max)
}

func TestDecodeRealFirstFrame(t *testing.T) {
	c, err := readOne(t, realFirstFrame, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := &Command{Code: 105, Language: "GO", Version: 317, Opaque: 1, ExtFields: FieldsOf(map[string]string{"topic": "TopicS_77783"})}
	if !reflect.DeepEqual(canonical(c), canonical(want)) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
}

func TestGoldenResponseFrame(t *testing.T) {
	c := &Command{Code: 0, Opaque: 7, Flag: FlagResponse, ExtFields: FieldsOf(map[string]string{"queueId": "0", "msgId": "7F000001000027DE0000000000000000", "props": "a\x01b\x02"}), Body: []byte("xy")}
	got := c.AppendFrame(nil)
	hdr := `{"code":0,"language":"JAVA","version":0,"opaque":7,"flag":1,"remark":"","extFields":{"msgId":"7F000001000027DE0000000000000000","props":"a\u0001b\u0002","queueId":"0"},"serializeTypeCurrentRPC":"JSON"}`
	want := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)+2))
	want = binary.BigEndian.AppendUint32(want, uint32(len(hdr)))
	want = append(want, hdr...)
	want = append(want, "xy"...)
	if !bytes.Equal(got, want) {
		t.Fatalf("frame mismatch\n got %q\nwant %q", got, want)
	}
	// The header must be valid JSON whose extFields values are all strings
	// (rocketmq-client-go's jsoniter drops the response otherwise).
	var probe struct {
		ExtFields map[string]string `json:"extFields"`
	}
	if err := json.Unmarshal([]byte(hdr), &probe); err != nil || probe.ExtFields["props"] != "a\x01b\x02" {
		t.Fatalf("header not decodable as string map: %v %+v", err, probe)
	}
}

func TestGoldenBinaryHeader(t *testing.T) {
	c := &Command{Code: 10, Language: "GO", Version: 317, Opaque: 3, Flag: 2, Remark: "r", ExtFields: FieldsOf(map[string]string{"k": "vv"}), SerializeType: SerializeRocketMQ}
	got := c.AppendFrame(nil)
	want := []byte{
		0, 0, 0, 35, // total
		1, 0, 0, 31, // type 1, header length 31
		0, 10, // code
		9,     // GO
		1, 61, // version 317
		0, 0, 0, 3, // opaque
		0, 0, 0, 2, // flag
		0, 0, 0, 1, 'r', // remark
		0, 0, 0, 9, // ext length
		0, 1, 'k', 0, 0, 0, 2, 'v', 'v',
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("binary frame mismatch\n got %v\nwant %v", got, want)
	}
	back, err := readOne(t, got, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(canonical(back), canonical(c)) {
		t.Fatalf("round trip: got %+v want %+v", back, c)
	}
}

func TestDecodeLenientJSON(t *testing.T) {
	// Numbers and booleans in extFields, an int language and nulls are
	// accepted; unknown fields are ignored.
	h := `{"code":11,"language":0,"version":1,"opaque":-5,"flag":2,"remark":null,"extFields":{"queueId":3,"b":true,"n":null,"s":"x"},"serializeTypeCurrentRPC":"JSON","other":[1]}`
	c, err := DecodeHeader(SerializeJSON, []byte(h))
	if err != nil {
		t.Fatal(err)
	}
	if c.Language != "0" || c.Opaque != -5 || !c.IsOneway() || c.IsResponse() {
		t.Fatalf("bad decode %+v", c)
	}
	want := map[string]string{"queueId": "3", "b": "true", "s": "x"}
	if !reflect.DeepEqual(c.ExtFields.Map(), want) {
		t.Fatalf("ext %v want %v", c.ExtFields, want)
	}
}

func TestReadCommandErrors(t *testing.T) {
	frame := func(total, info uint32, rest []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, total)
		b = binary.BigEndian.AppendUint32(b, info)
		return append(b, rest...)
	}
	cases := []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"empty", nil, 0, io.EOF},
		{"too large", frame(1<<20, 0, nil), 1 << 10, ErrFrameTooLarge},
		{"negative total", frame(0xFFFFFFF0, 0, nil), 0, ErrMalformed},
		{"total < 4", frame(3, 0, nil), 0, ErrMalformed},
		{"header longer than frame", frame(10, 20, make([]byte, 6)), 0, ErrMalformed},
		{"bad json", frame(7, 3, []byte("{x}")), 0, ErrMalformed},
		{"unknown serialize type", frame(6, 2<<24|2, []byte("{}")), 0, ErrMalformed},
		{"truncated length", []byte{0, 0}, 0, io.ErrUnexpectedEOF},
		{"truncated body", frame(100, 2, []byte("{}")), 0, io.ErrUnexpectedEOF},
		{"binary trailing", frame(4+22, 1<<24|22, make([]byte, 22)), 0, ErrMalformed},
		{"binary short", frame(4+5, 1<<24|5, make([]byte, 5)), 0, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readOne(t, tc.in, tc.max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestMaxFrameBoundary(t *testing.T) {
	c := &Command{Code: 1, Body: make([]byte, 1000)}
	f := c.AppendFrame(nil)
	total := len(f) - 4
	if _, err := readOne(t, f, total); err != nil {
		t.Fatalf("frame of exactly max: %v", err)
	}
	if _, err := readOne(t, f, total-1); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame of max+1: %v", err)
	}
}

func TestReadSeveralFrames(t *testing.T) {
	var buf []byte
	for i := range int32(5) {
		buf = (&Command{Code: 10, Opaque: i, Body: bytes.Repeat([]byte{byte(i)}, int(i))}).AppendFrame(buf)
	}
	r := bufio.NewReader(bytes.NewReader(buf))
	for i := range int32(5) {
		c, err := ReadCommand(r, 0)
		if err != nil || c.Opaque != i || len(c.Body) != int(i) {
			t.Fatalf("frame %d: %+v %v", i, c, err)
		}
	}
	if _, err := ReadCommand(r, 0); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
}

func genCommand(t *rapid.T) *Command {
	str := rapid.String()
	c := &Command{
		Code:          rapid.Int16().Draw(t, "code"),
		Language:      rapid.SampledFrom([]string{"GO", "JAVA", "CPP", "RUST"}).Draw(t, "lang"),
		Opaque:        rapid.Int32().Draw(t, "opaque"),
		Flag:          rapid.Int32Range(0, 3).Draw(t, "flag"),
		Remark:        str.Draw(t, "remark"),
		SerializeType: rapid.SampledFrom([]byte{SerializeJSON, SerializeRocketMQ}).Draw(t, "st"),
	}
	if c.SerializeType == SerializeRocketMQ {
		c.Version = int32(rapid.Int16().Draw(t, "version16"))
	} else {
		c.Version = rapid.Int32().Draw(t, "version")
	}
	if m := rapid.MapOf(str, str).Draw(t, "ext"); len(m) > 0 {
		c.ExtFields = FieldsOf(m)
	}
	if b := rapid.SliceOf(rapid.Byte()).Draw(t, "body"); len(b) > 0 {
		c.Body = b
	}
	return c
}

func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCommand(t)
		f := c.AppendFrame([]byte("prefix"))
		if string(f[:6]) != "prefix" {
			t.Fatal("prefix clobbered")
		}
		back, err := ReadCommand(bufio.NewReader(bytes.NewReader(f[6:])), 0)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(canonical(back), canonical(c)) {
			t.Fatalf("round trip\n got %+v\nwant %+v", back, c)
		}
		var w bytes.Buffer
		if _, err := c.WriteTo(&w); err != nil || !bytes.Equal(w.Bytes(), f[6:]) {
			t.Fatalf("WriteTo differs from AppendFrame: %v", err)
		}
	})
}

func TestJSONStringEscaping(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\", "\x00\x01\x02\x1f\n\r\t", "héllo", "\xff\xfe", "\u2028\u2029", strings.Repeat("é", 100)} {
		enc := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%q encoded as %s: %v", s, enc, err)
		}
		std, _ := json.Marshal(s)
		var stdBack string
		_ = json.Unmarshal(std, &stdBack)
		if back != stdBack {
			t.Fatalf("%q: got %q, encoding/json gives %q", s, back, stdBack)
		}
	}
}

// canonical returns a copy of c with its extension fields in the encoders'
// order (sorted, each key once) and an empty set as nil, so that commands
// decoded by different paths compare equal when they mean the same.
func canonical(c *Command) *Command {
	if c == nil {
		return nil
	}
	d := *c
	d.ExtFields = c.ExtFields.Unique(nil)
	if len(d.ExtFields) == 0 {
		d.ExtFields = nil
	}
	return &d
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
