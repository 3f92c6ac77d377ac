package remoting

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
)

// FuzzReadCommand feeds arbitrary bytes to ReadCommand. It must never
// panic, and whatever decodes must re-encode to a frame that decodes to the
// same command.
func FuzzReadCommand(f *testing.F) {
	f.Add(realFirstFrame)
	f.Add((&Command{Code: 10, Opaque: 2, ExtFields: FieldsOf(map[string]string{"a": "b\x01c\x02"}), Body: []byte("hi")}).AppendFrame(nil))
	f.Add((&Command{Code: 0, Flag: 1, Remark: "x", ExtFields: FieldsOf(map[string]string{"k": "v"}), SerializeType: SerializeRocketMQ}).AppendFrame(nil))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadCommand(bufio.NewReader(bytes.NewReader(data)), 1<<20)
		if err != nil {
			return
		}
		// Normalise what output legitimately changes: JSON replaces
		// invalid UTF-8, and the binary header has a 16-bit version.
		c2, err := ReadCommand(bufio.NewReader(bytes.NewReader(c.AppendFrame(nil))), 1<<20)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v (%+v)", err, c)
		}
		c3, err := ReadCommand(bufio.NewReader(bytes.NewReader(c2.AppendFrame(nil))), 1<<20)
		if err != nil {
			t.Fatalf("second re-encode does not decode: %v", err)
		}
		if !reflect.DeepEqual(canonical(c2), canonical(c3)) {
			t.Fatalf("encode/decode not stable:\n%+v\n%+v", c2, c3)
		}
	})
}

// FuzzDecodeHeader feeds arbitrary headers of both serialize types to
// DecodeHeader. It must never panic.
func FuzzDecodeHeader(f *testing.F) {
	f.Add(byte(0), realFirstFrame[8:])
	f.Add(byte(0), []byte(`{"code":1,"language":9,"extFields":{"a":1,"b":null}}`))
	bin := (&Command{Code: 10, Language: "GO", Remark: "r", ExtFields: FieldsOf(map[string]string{"k": "vv"}), SerializeType: SerializeRocketMQ}).AppendFrame(nil)
	f.Add(byte(1), bin[8:])
	f.Add(byte(1), []byte{0, 1, 2, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, st byte, h []byte) {
		c, err := DecodeHeader(st, h)
		if err != nil {
			return
		}
		if c.SerializeType != st {
			t.Fatalf("serialize type %d, decoded as %d", st, c.SerializeType)
		}
		if st == SerializeRocketMQ {
			// The binary header is canonical up to extField order.
			back, err := DecodeHeader(st, c.AppendFrame(nil)[8:])
			if err != nil || !reflect.DeepEqual(canonical(back), canonical(c)) {
				t.Fatalf("binary header round trip: %v\n%+v\n%+v", err, back, c)
			}
		}
	})
}
