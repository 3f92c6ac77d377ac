package remoting

import (
	"encoding/binary"
	"fmt"
)

// languageCodes are Java's LanguageCode ordinals, used by the binary header.
var languageCodes = []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}

func languageName(b byte) string {
	if int(b) < len(languageCodes) {
		return languageCodes[b]
	}
	return "OTHER"
}

func languageCode(s string) byte {
	for i, n := range languageCodes {
		if n == s {
			return byte(i)
		}
	}
	return 7 // OTHER
}

// decodeBinaryHeader decodes RocketMQ's binary header: code, language,
// version, opaque and flag, the remark and the extension fields, each
// length-prefixed, with nothing after them.
func decodeBinaryHeader(h []byte) (*Command, error) {
	d := binReader{b: h}
	c := &Command{SerializeType: SerializeRocketMQ}
	c.Code = int16(d.u16())
	c.Language = languageName(d.u8())
	c.Version = int32(int16(d.u16()))
	c.Opaque = int32(d.u32())
	c.Flag = int32(d.u32())
	c.Remark = string(d.bytes(int(int32(d.u32()))))
	extLen := int(int32(d.u32()))
	if d.err == nil && extLen > 0 {
		if extLen > len(d.b) {
			return nil, fmt.Errorf("binary header: extFields length %d exceeds remaining %d: %w", extLen, len(d.b), ErrMalformed)
		}
		f, err := decodeBinaryExtFields(d.bytes(extLen))
		if err != nil {
			return nil, err
		}
		c.ExtFields = f
	}
	if d.err != nil {
		return nil, fmt.Errorf("binary header: %w", d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("binary header: %d trailing bytes: %w", len(d.b), ErrMalformed)
	}
	return c, nil
}

// decodeBinaryExtFields decodes the extension fields of a binary header,
// each a key with a 16-bit length and a value with a 32-bit one, in
// arrival order. b is not empty; the result is never nil.
func decodeBinaryExtFields(b []byte) (Fields, error) {
	e := binReader{b: b}
	f := Fields{}
	for len(e.b) > 0 && e.err == nil {
		k := string(e.bytes(int(e.u16())))
		v := string(e.bytes(int(int32(e.u32()))))
		if e.err == nil {
			f = append(f, Field{k, v})
		}
	}
	if e.err != nil {
		return nil, fmt.Errorf("binary header extFields: %w", e.err)
	}
	return f, nil
}

// binReader reads big-endian fields, remembering the first error.
type binReader struct {
	b   []byte
	err error
}

func (d *binReader) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("field of %d bytes, %d left: %w", n, len(d.b), ErrMalformed)
		d.b = nil
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *binReader) u8() byte {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *binReader) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *binReader) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *binReader) bytes(n int) []byte {
	if n == 0 {
		return nil
	}
	return d.take(n)
}

func (c *Command) appendBinaryHeader(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, languageCode(c.language()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var small [16]Field
	for _, f := range c.ExtFields.Unique(small[:0]) {
		k, v := f.Key, f.Value
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst
}
