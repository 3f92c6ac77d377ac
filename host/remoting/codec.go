package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrame is the default limit on a frame's total length (16 MiB).
const DefaultMaxFrame = 16 << 20

// Errors returned by ReadCommand and DecodeHeader. They are always wrapped
// with context; test with errors.Is.
var (
	// ErrFrameTooLarge means a frame's declared length exceeds the
	// configured maximum. The stream cannot be resynchronised: the
	// connection must be closed.
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	// ErrMalformed means a frame or header is not valid RocketMQ remoting
	// data. The stream cannot be trusted any more: the connection must be
	// closed.
	ErrMalformed = errors.New("remoting: malformed frame")
)

// DecodeHeader decodes a command header of serialize type st (SerializeJSON
// or SerializeRocketMQ). The result has no Body. Any other type, or a header
// that does not parse, yields an error wrapping ErrMalformed. It never
// panics, whatever the input.
func DecodeHeader(st byte, h []byte) (*Command, error) {
	switch st {
	case SerializeJSON:
		return decodeJSONHeader(h)
	case SerializeRocketMQ:
		return decodeBinaryHeader(h)
	default:
		return nil, fmt.Errorf("unknown serialize type %d: %w", st, ErrMalformed)
	}
}

// AppendFrame appends c's complete wire frame to dst and returns the
// extended slice. Extension fields are written in sorted key order, so the
// output is deterministic. A JSON header is compact and every extension
// value is a JSON string. An empty Language is written as ServerLanguage.
func (c *Command) AppendFrame(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	hstart := len(dst)
	st := c.SerializeType
	if st == SerializeRocketMQ {
		dst = c.appendBinaryHeader(dst)
	} else {
		st = SerializeJSON
		dst = c.appendJSONHeader(dst)
	}
	hlen := len(dst) - hstart
	dst = append(dst, c.Body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(st)<<24|uint32(hlen)&0xFFFFFF)
	return dst
}

// WriteTo writes c's frame to w. It implements io.WriterTo.
func (c *Command) WriteTo(w io.Writer) (int64, error) {
	buf := c.AppendFrame(make([]byte, 0, 256+len(c.Body)))
	n, err := w.Write(buf)
	if err != nil {
		return int64(n), fmt.Errorf("writing command frame: %w", err)
	}
	return int64(n), nil
}
