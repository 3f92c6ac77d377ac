package remoting

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// checkFastEquivalent asserts the fast decoder's contract on h: when it
// accepts, the encoding/json decoder accepts too and gives the same command;
// and decodeJSONHeader always agrees with the encoding/json decoder.
func checkFastEquivalent(t interface {
	Helper()
	Fatalf(string, ...any)
}, h []byte) {
	t.Helper()
	std, stdErr := decodeJSONHeaderStd(h)
	fast, ok := fastDecodeJSONHeader(h)
	if ok {
		if stdErr != nil {
			t.Fatalf("fast path accepts %q, encoding/json rejects it: %v", h, stdErr)
		}
		if !reflect.DeepEqual(canonical(fast), canonical(std)) {
			t.Fatalf("fast path differs on %q\nfast %#v\n std %#v", h, fast, std)
		}
	}
	got, err := decodeJSONHeader(h)
	if (err == nil) != (stdErr == nil) || !reflect.DeepEqual(canonical(got), canonical(std)) {
		t.Fatalf("decodeJSONHeader differs on %q: %v vs %v\n%#v\n%#v", h, err, stdErr, got, std)
	}
}

// fastCases are headers exercising each rule of the fast path; accept says
// whether the fast path is expected to handle it (rather than decline).
var fastCases = []struct {
	h      string
	accept bool
}{
	{string(realFirstFrame[8:]), true},
	{`{"code":0,"language":"JAVA","version":0,"opaque":7,"flag":1,"remark":"","extFields":{"msgId":"7F","props":"a\u0001b\u0002","queueId":"0"},"serializeTypeCurrentRPC":"JSON"}`, true},
	{` { "code" : -32768 , "opaque":2147483647,"version":-2147483648 } `, true},
	{`{}`, true},
	{`{"extFields":{}}`, true},
	{`{"extFields":{"n":null}}`, false}, // a null ext value is left to encoding/json
	{`{"extFields":{"a":"1","a":null,"b":2,"b":"x"}}`, false},
	{`{"extFields":{"a":"1","a":"2","b":2,"b":"x"}}`, true}, // repeated keys: the last wins
	{`{"extFields":null}`, true},
	{`{"language":0,"remark":null,"extFields":{"queueId":3,"b":true,"o":{ "x" : [1, 2.5e-3, "y"] },"s":"x"},"other":[1],"x":{"y":null}}`, true},
	{`{"language":null,"code":null}`, true},
	{`{"remark":"esc \n\t\r\b\f\"\\\/ \u00e9 \u20AC \ud83d\ude00 é 😀"}`, true},
	{`{"extFields":{"k\u0041":"v\u0000"}}`, true},
	{`{"language":[ 1 , {"a" : "b"} ]}`, true},
	{`{"code":32768}`, false},
	{`{"code":1.0}`, false},
	{`{"code":1e2}`, false},
	{`{"code":01}`, false},
	{`{"code":"1"}`, false},
	{`{"code":-0}`, true},
	{`{"Code":1}`, false},
	{`{"EXTFIELDS":{}}`, false},
	{`{"co\u0064e":1}`, true},
	{"{\"\u212aey\":1}", false},
	{`{"code":1,"code":2}`, false},
	{`{"remark":"\ud800"}`, false},
	{`{"remark":"\udc00"}`, false},
	{`{"remark":"\ud800\u0041"}`, false},
	{"{\"remark\":\"\xff\"}", false},
	{"{\"remark\":\"a\nb\"}", false},
	{`{"remark":1}`, false},
	{`{"extFields":[]}`, false},
	{`{"extFields":{"a":}}`, false},
	{`{"code":1,}`, false},
	{`{"code":1} x`, false},
	{`null`, false},
	{`[]`, false},
	{``, false},
	{`{"x":1.}`, false},
	{`{"x":-}`, false},
	{`{"x":.5}`, false},
	{`{"x":tru}`, false},
	{`{"remark":"\x"}`, false},
	{`{"remark":"\u12G4"}`, false},
	{`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, false},
}

func TestFastHeaderCases(t *testing.T) {
	for _, tc := range fastCases {
		t.Run(tc.h, func(t *testing.T) {
			checkFastEquivalent(t, []byte(tc.h))
			if _, ok := fastDecodeJSONHeader([]byte(tc.h)); ok != tc.accept {
				t.Fatalf("fast path accepted=%v, want %v", ok, tc.accept)
			}
		})
	}
}

// FuzzFastHeaderEquivalence checks the fast JSON header decoder against the
// encoding/json one: the fast path must never accept what encoding/json
// rejects and must give the same command on what it accepts; the combined
// decoder must always agree with encoding/json.
func FuzzFastHeaderEquivalence(f *testing.F) {
	f.Add(realFirstFrame[8:])
	for _, tc := range fastCases {
		f.Add([]byte(tc.h))
	}
	f.Add((&Command{Code: 10, Opaque: 2, Remark: "r\"\\\n", ExtFields: FieldsOf(map[string]string{"a": "b\x01c\x02", "é": "\u2028"})}).AppendFrame(nil)[8:])
	f.Fuzz(func(t *testing.T, h []byte) {
		checkFastEquivalent(t, h)
	})
}

// TestFastRoundTripProperty encodes random commands and decodes them with
// the fast path, which must accept every header the encoder writes and give
// the command back (with invalid UTF-8 replaced, as JSON requires).
func TestFastRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCommand(t)
		c.SerializeType = SerializeJSON
		c.Body = nil
		f := c.AppendFrame(nil)
		h := f[8:]
		if hl := int(binary.BigEndian.Uint32(f[4:]) & 0xFFFFFF); hl != len(h) {
			t.Fatalf("header length %d, have %d", hl, len(h))
		}
		fast, ok := fastDecodeJSONHeader(h)
		if !ok {
			t.Fatalf("fast path declined encoder output %q", h)
		}
		std, err := decodeJSONHeaderStd(h)
		if err != nil || !reflect.DeepEqual(canonical(fast), canonical(std)) {
			t.Fatalf("fast %#v\nstd %#v (%v)", fast, std, err)
		}
		want := *c
		want.Remark = strings.ToValidUTF8(c.Remark, "\uFFFD")
		if c.ExtFields != nil {
			m := make(map[string]string)
			for k, v := range c.ExtFields.Map() {
				m[strings.ToValidUTF8(k, "\uFFFD")] = strings.ToValidUTF8(v, "\uFFFD")
			}
			want.ExtFields = FieldsOf(m)
		}
		if validKeys(c.ExtFields.Map()) && !reflect.DeepEqual(canonical(fast), canonical(&want)) {
			t.Fatalf("round trip\n got %#v\nwant %#v", fast, &want)
		}
	})
}

// validKeys reports whether replacing invalid UTF-8 leaves m's keys
// distinct (otherwise which value survives depends on key order).
func validKeys(m map[string]string) bool {
	for k := range m {
		if !utf8.ValidString(k) {
			return false
		}
	}
	return true
}

// TestFastGeneratedHeaderProperty builds JSON headers from a grammar with
// random whitespace, escapes, value types, duplicates and unknown fields and
// checks the fast path against encoding/json on each.
func TestFastGeneratedHeaderProperty(t *testing.T) {
	ws := rapid.SampledFrom([]string{"", "", " ", "\n\t ", "\r"})
	strChunk := rapid.SampledFrom([]string{"a", "Z", "é", "😀", `\n`, `\"`, `\\`, `\/`, `\u0041`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\b`, `\u2028`, "\x7f", "\xff"})
	jstr := rapid.Custom(func(t *rapid.T) string {
		return `"` + strings.Join(rapid.SliceOfN(strChunk, 0, 4).Draw(t, "chunks"), "") + `"`
	})
	scalar := rapid.OneOf(jstr, rapid.SampledFrom([]string{"null", "true", "false", "0", "-1", "32767", "32768", "-2147483648", "2147483648", "1.5", "1e3", "-0", "[]", "{}", `[1,"x",{"a":null}]`, `{"k":"v"}`}))
	key := rapid.SampledFrom([]string{`"code"`, `"language"`, `"version"`, `"opaque"`, `"flag"`, `"remark"`, `"extFields"`, `"serializeTypeCurrentRPC"`, `"Code"`, `"other"`, `"co\u0064e"`, `"x"`})
	ext := rapid.Custom(func(t *rapid.T) string {
		n := rapid.IntRange(0, 4).Draw(t, "n")
		parts := make([]string, n)
		for i := range parts {
			k := rapid.OneOf(jstr, rapid.SampledFrom([]string{`"topic"`, `"queueId"`, `"a"`})).Draw(t, "ek")
			parts[i] = ws.Draw(t, "w1") + k + ws.Draw(t, "w2") + ":" + ws.Draw(t, "w3") + scalar.Draw(t, "ev") + ws.Draw(t, "w4")
		}
		return "{" + strings.Join(parts, ",") + "}"
	})
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 8).Draw(t, "fields")
		parts := make([]string, n)
		for i := range parts {
			k := key.Draw(t, "k")
			var v string
			if k == `"extFields"` && rapid.Bool().Draw(t, "obj") {
				v = ext.Draw(t, "ext")
			} else {
				v = scalar.Draw(t, "v")
			}
			parts[i] = ws.Draw(t, "a") + k + ws.Draw(t, "b") + ":" + ws.Draw(t, "c") + v + ws.Draw(t, "d")
		}
		h := ws.Draw(t, "lead") + "{" + strings.Join(parts, ",") + "}" + ws.Draw(t, "trail")
		checkFastEquivalent(t, []byte(h))
	})
}

// appendJSONStringRef is appendJSONString as it was before the fast copy
// loop; the property below pins the new one to it byte for byte.
func appendJSONStringRef(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b >= 0x20:
				dst = append(dst, b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// appendJSONHeaderRef is the header encoder as it was before (sorting with
// sortedKeys, the reference escaper).
func appendJSONHeaderRef(c *Command, dst []byte) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	dst = appendJSONStringRef(dst, c.language())
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = appendJSONStringRef(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	m := c.ExtFields.Map()
	for i, k := range sortedKeys(m) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONStringRef(dst, k)
		dst = append(dst, ':')
		dst = appendJSONStringRef(dst, m[k])
	}
	return append(dst, `},"serializeTypeCurrentRPC":"JSON"}`...)
}

func TestEncodeMatchesReferenceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		raw := string(rapid.SliceOf(rapid.Byte()).Draw(t, "raw"))
		for _, v := range []string{s, raw} {
			if got, want := appendJSONString(nil, v), appendJSONStringRef(nil, v); !bytes.Equal(got, want) {
				t.Fatalf("%q: got %s want %s", v, got, want)
			}
		}
		c := genCommand(t)
		if n := rapid.IntRange(0, 40).Draw(t, "many"); n > 16 {
			// Exercise the sortedKeys path for large maps.
			c.ExtFields = nil
			for i := range n {
				c.ExtFields = append(c.ExtFields, Field{fmt.Sprint("k", i), fmt.Sprint(i)})
			}
		}
		if got, want := c.appendJSONHeader(nil), appendJSONHeaderRef(c, nil); !bytes.Equal(got, want) {
			t.Fatalf("header\n got %s\nwant %s", got, want)
		}
	})
}

// benchSendHeader is a representative SEND_MESSAGE_V2 request header, as the
// wire benchmark's producers send it.
var benchSendHeader = (&Command{Code: 310, Language: "GO", Version: 317, Opaque: 123456, ExtFields: FieldsOf(map[string]string{
	"a": "ProducerGroupName", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "3", "f": "0",
	"g": "1732900000000", "h": "0", "i": "KEYS\x01k-1\x02WAIT\x01true\x02UNIQ_KEY\x017F00000100002A9F0000000000000001\x02",
	"j": "0", "k": "false", "m": "false",
})}).AppendFrame(nil)[8:]

func BenchmarkDecodeHeader(b *testing.B) {
	for _, bc := range []struct {
		name string
		dec  func([]byte) (*Command, error)
	}{
		{"old-encoding-json", decodeJSONHeaderStd},
		{"new", decodeJSONHeader},
	} {
		for _, h := range []struct {
			name string
			h    []byte
		}{{"send", benchSendHeader}, {"first", realFirstFrame[8:]}} {
			b.Run(bc.name+"/"+h.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(h.h)))
				for b.Loop() {
					if _, err := bc.dec(h.h); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	req := &Command{Opaque: 99}
	resp := NewResponse(req, 0, "")
	resp.ExtFields = FieldsOf(map[string]string{
		"msgId": "7F00000100002A9F0000000000001234", "queueId": "3", "queueOffset": "123456",
		"transactionId": "7F00000100002A9F0000000000001234", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
	})
	buf := make([]byte, 0, 1024)
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// The old AppendFrame: frame words around the old header encoder.
			buf = append(buf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
			buf = appendJSONHeaderRef(resp, buf)
			binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
			binary.BigEndian.PutUint32(buf[4:], uint32(len(buf)-8))
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = resp.AppendFrame(buf[:0])
		}
	})
}
